#pragma once

struct invoice {
  long id;
};
