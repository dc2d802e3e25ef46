#include <cstdio>
#include <filesystem>

#include <idem/idem.hpp>
#include <idem/sqlite_store.hpp>

#include "billing.idem.hpp"
#include "mailing.idem.hpp"

int main() {
  // A store from the install tree too: the records live in a SQLite file for this run.
  const auto path = std::filesystem::temp_directory_path() / "idem-install-consumer.db";
  std::filesystem::remove(path);
  idem::sqlite_store store{idem::sqlite_store_options{.path = path}};
  idem::engine engine{store};
  idem::invoke<&send_invoice>(engine, invoice{42});
  idem::invoke<&send_invoice>(engine, invoice{42});
  idem::guarded<mailer> mail{engine};
  mail.welcome("a@example.org");
  mail.welcome("a@example.org");
  std::printf("invoices %d, mails %d\n", invoices_sent, mails_sent);
  std::filesystem::remove(path);
  return invoices_sent == 1 && mails_sent == 1 ? 0 : 1;
}
