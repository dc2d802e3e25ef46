// tests/redis_cluster/cluster_test.cpp — what only a Redis Cluster involves.
#include <catch2/catch.hpp>

#include "cluster_support.hpp"
