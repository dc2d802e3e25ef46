#include "accounts.hpp"
#include "premium.hpp"

namespace bank {

void Account::refund(const Ticket&, Reason reason, int times) {
  refunds += times;
  last_reason = reason;
}
void Account::log(int) { ++logs; }
void Account::put(int) { ++puts; }
void Account::touch(const ::context&, const ::error&, int policy) { touches += policy; }
void Savings::refund(const Ticket& t, Reason reason, int times) {
  ++savings_refunds;
  Account::refund(t, reason, times);
}
void Retail::Handler::on(int) { ++runs; }
void Corporate::Handler::on(int) { ++runs; }
void Vault::open(int) { ++opens; }
void Channel::send(int) { ++sent; }
void Premium::upgrade(int) { ++upgrades; }

}  // namespace bank

void bank::audit(int) noexcept { ++audits; }
