#include <cstdio>

#include <idem/idem.hpp>

#include "billing.idem.hpp"
#include "mailing.idem.hpp"

int main() {
  idem::memory_store store;
  idem::engine engine{store};
  idem::invoke<&send_invoice>(engine, invoice{42});
  idem::invoke<&send_invoice>(engine, invoice{42});
  idem::guarded<mailer> mail{engine};
  mail.welcome("a@example.org");
  mail.welcome("a@example.org");
  std::printf("invoices %d, mails %d\n", invoices_sent, mails_sent);
  return invoices_sent == 1 && mails_sent == 1 ? 0 : 1;
}
