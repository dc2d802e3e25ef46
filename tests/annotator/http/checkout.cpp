// The annotated controller's bodies; see checkout.hpp.
#include "checkout.hpp"

namespace shop {

void Checkout::pay(const httplib::Request& request, httplib::Response& response) {
  const int n = ++payments;
  response.status = 201;
  response.set_content("payment " + std::to_string(n) + " of " + request.body, "text/plain");
}

void Checkout::archive(const Receipt& /*receipt*/) { ++archived; }

void Status::ping(const httplib::Request&, httplib::Response& response) {
  ++pings;
  response.set_content("pong", "text/plain");
}

}  // namespace shop
