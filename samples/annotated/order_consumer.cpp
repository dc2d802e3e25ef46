#include "order_consumer.hpp"

namespace orders {

receipt consumer::charge(const delivery& d) {
  std::lock_guard lock(mutex_);
  ++charges_[d.order];
  return receipt{d.order, d.id, d.cents};
}

void consumer::ship(const delivery& d) {
  if (while_shipping) while_shipping();
  std::lock_guard lock(mutex_);
  ++shipments_[d.order];
}

std::map<std::string, int> consumer::charges() const {
  std::lock_guard lock(mutex_);
  return charges_;
}

std::map<std::string, int> consumer::shipments() const {
  std::lock_guard lock(mutex_);
  return shipments_;
}

}  // namespace orders
