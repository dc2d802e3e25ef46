#pragma once

struct Invoice {
  long id;
};
