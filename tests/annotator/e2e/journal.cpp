// The bodies of journal.hpp: they write through the transaction bound to their thread.
#include "journal.hpp"

namespace journal {

void Journal::append(int id) {
  ++appends;
  transaction::current().write(id);
  if (id < 0) throw std::runtime_error("declined");
}

void append_entry(int id) { transaction::current().write(id); }

}  // namespace journal
