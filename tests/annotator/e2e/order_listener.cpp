#include "order_listener.hpp"

namespace shop {

void OrderListener::on(const OrderPlaced& /*event*/) {
  if (during_action) during_action();
  ++handled;
}

Receipt OrderListener::settle(const SettleCommand& cmd) {
  if (during_action) during_action();
  const int run = ++settled;
  return Receipt{"settled " + cmd.order + " for " + cmd.customer, run};
}

}  // namespace shop

void rebuild_index(const Job& /*job*/) { ++index_rebuilds; }
