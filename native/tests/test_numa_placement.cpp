// NUMA-aware expert placement (load stage 6) on an injected topology: the
// machine's CPUs split into fake nodes (split_numa_nodes_for_testing, or
// GUILD_NUMA_FAKE_NODES for a whole load). Checks the node detection and
// worker order, the assignment rule, the pool's node loops (strict: a task
// runs only on its node; otherwise each node's threads take their own tasks
// first) and that a model loaded with placement gives bit-identical logits.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <span>
#include <thread>
#include <vector>

#include "artifact/gguf.h"
#include "check.h"
#include "core/json.h"
#include "core/thread_pool.h"
#include "runtime/machine.h"
#include "runtime/model.h"
#include "runtime/numa_placement.h"
#include "runtime/session.h"

using namespace guild;

namespace {

// A machine with CPUs 0..n_cpus-1 on the given node sizes (in CPU order),
// every CPU its own physical core.
MachineInfo fake_machine(const std::vector<int>& node_sizes) {
  MachineInfo m;
  int cpu = 0;
  for (size_t i = 0; i < node_sizes.size(); ++i) {
    NumaNode n;
    n.id = static_cast<int>(i);
    for (int k = 0; k < node_sizes[i]; ++k) n.cpus.push_back(cpu++);
    m.numa_nodes.push_back(n);
  }
  for (int c = 0; c < cpu; ++c) m.worker_cpus.push_back(c);
  m.worker_primary = cpu;
  m.logical_usable = m.physical_usable = cpu;
  m.numa_source = "test";
  return m;
}

// n_layer layers of three expert tensors (gate, up, down) over one buffer.
std::vector<ExpertLayerTensors> fake_layers(std::vector<uint8_t>& buf, int n_layer, int64_t n_expert,
                                            uint64_t expert_bytes) {
  buf.assign(static_cast<size_t>(n_layer) * 3 * n_expert * expert_bytes, 0);
  std::vector<ExpertLayerTensors> layers;
  uint8_t* p = buf.data();
  for (int l = 0; l < n_layer; ++l) {
    ExpertLayerTensors L;
    L.layer = l;
    for (int t = 0; t < 3; ++t) {
      L.data.push_back(p);
      L.expert_bytes.push_back(expert_bytes);
      p += n_expert * expert_bytes;
    }
    layers.push_back(std::move(L));
  }
  return layers;
}

std::unique_ptr<GuildModel> load_model(const std::string& file, int n_threads, const char* fake_nodes) {
  if (fake_nodes) setenv("GUILD_NUMA_FAKE_NODES", fake_nodes, 1);
  else unsetenv("GUILD_NUMA_FAKE_NODES");
  LoadOptions opt;
  opt.n_threads = n_threads;
  opt.n_ctx = 256;
  opt.kv_type = KvType::F32;
  std::string err;
  auto m = GuildModel::load(check::fixtures_dir() + "/models/" + file, opt, &err);
  unsetenv("GUILD_NUMA_FAKE_NODES");
  if (!m) std::printf("  load failed: %s\n", err.c_str());
  return m;
}

const json::Value& stage(const json::Value& profile, const char* name) {
  for (const json::Value& s : profile["stages"].as_array())
    if (s["name"].as_string() == name) return s;
  static const json::Value none;
  return none;
}

}  // namespace

TEST(sysfs_nodes_cover_the_usable_cpus) {
  unsetenv("GUILD_NUMA_FAKE_NODES");
  const MachineInfo m = detect_machine();
  REQUIRE(!m.numa_nodes.empty());
  std::set<int> in_nodes;
  for (const NumaNode& n : m.numa_nodes)
    for (int c : n.cpus) CHECK_MSG(in_nodes.insert(c).second, "CPU %d on two nodes", c);
  const std::set<int> workers(m.worker_cpus.begin(), m.worker_cpus.end());
  CHECK(workers == in_nodes);
  CHECK(m.worker_primary >= 1 && m.worker_primary <= static_cast<int>(m.worker_cpus.size()));
  const json::Value j = m.to_json();
  CHECK(j["numa_nodes"].as_int() == static_cast<int64_t>(m.numa_nodes.size()));
  CHECK(j["numa"].size() == m.numa_nodes.size());
  CHECK(j["numa_source"].as_string() == m.numa_source);
  std::printf("  %zu node(s) (%s)\n", m.numa_nodes.size(), m.numa_source.c_str());
}

TEST(fake_nodes_split_the_cpus_and_interleave_workers) {
  unsetenv("GUILD_NUMA_FAKE_NODES");
  MachineInfo m = detect_machine();
  const std::vector<int> before = m.worker_cpus;
  split_numa_nodes_for_testing(m, 2);
  if (before.size() < 2) {
    CHECK(m.numa_nodes.size() == 1);
    return;
  }
  REQUIRE(m.numa_nodes.size() == 2);
  CHECK(m.numa_nodes[0].id == 0 && m.numa_nodes[1].id == 1);
  std::multiset<int> a(before.begin(), before.end()), b(m.worker_cpus.begin(), m.worker_cpus.end());
  CHECK(a == b);  // a permutation
  // The first two workers sit on different nodes.
  CHECK(m.node_index_of_cpu(m.worker_cpus[0]) != m.node_index_of_cpu(m.worker_cpus[1]));
  CHECK(m.to_json()["numa"].size() == 2);
  CHECK(m.numa_source.find("fake") != std::string::npos);
}

TEST(worker_order_takes_the_nodes_in_turn) {
  MachineInfo m = fake_machine({4, 4});
  // Primaries 0,1,4,5 then siblings 2,3,6,7.
  m.worker_cpus = {0, 1, 4, 5, 2, 3, 6, 7};
  m.worker_primary = 4;
  interleave_worker_cpus_by_node(m);
  CHECK(m.worker_cpus == std::vector<int>({0, 4, 1, 5, 2, 6, 3, 7}));
  // One node: the order is left alone.
  MachineInfo one = fake_machine({8});
  one.worker_cpus = {0, 2, 4, 6, 1, 3, 5, 7};
  one.worker_primary = 4;
  interleave_worker_cpus_by_node(one);
  CHECK(one.worker_cpus == std::vector<int>({0, 2, 4, 6, 1, 3, 5, 7}));
  // Uneven nodes: the larger one fills the tail.
  MachineInfo uneven = fake_machine({1, 3});
  interleave_worker_cpus_by_node(uneven);
  CHECK(uneven.worker_cpus == std::vector<int>({0, 1, 2, 3}));
}

TEST(placement_rule_balances_bytes_per_worker) {
  std::vector<uint8_t> buf;
  // Two nodes, one worker each: each layer's experts alternate.
  {
    const MachineInfo m = fake_machine({2, 2});
    NumaPlacement p = plan_numa_placement(m, {0, 2}, 2, fake_layers(buf, 3, 8, 100), 8);
    REQUIRE(p.placed);
    CHECK(p.node_id == std::vector<int>({0, 1}));
    CHECK(p.workers_per_node == std::vector<int>({1, 1}));
    CHECK(p.thread_node == std::vector<int>({0, 1}));
    for (const auto& layer : p.expert_node)
      for (int e = 0; e < 8; ++e) CHECK(layer[e] == e % 2);
    CHECK(p.node_experts == std::vector<int64_t>({12, 12}));
    CHECK(p.node_bytes == std::vector<uint64_t>({3600, 3600}));
    // The pool view: one table per expert tensor, all of a layer alike.
    auto v = p.pool_view();
    CHECK(v->n_nodes == 2 && v->tables.size() == 9);
    for (const auto& L : p.layers)
      for (const uint8_t* key : L.data) {
        const PoolNuma::Table* t = v->find(key);
        REQUIRE(t);
        CHECK(t->node == p.expert_node[static_cast<size_t>(&L - p.layers.data())]);
      }
    CHECK(v->find(buf.data() + 1) == nullptr);
  }
  // Three workers on node 0, one on node 1: bytes follow the workers.
  {
    const MachineInfo m = fake_machine({3, 1});
    NumaPlacement p = plan_numa_placement(m, {0, 1, 2, 3}, 4, fake_layers(buf, 4, 16, 64), 16);
    REQUIRE(p.placed);
    CHECK(p.workers_per_node == std::vector<int>({3, 1}));
    CHECK(p.node_experts[0] + p.node_experts[1] == 64);
    CHECK_MSG(p.node_experts[0] == 48, "node 0 holds %lld experts", static_cast<long long>(p.node_experts[0]));
    // Per layer too: 12 and 4.
    for (const auto& layer : p.expert_node) {
      int on0 = 0;
      for (uint8_t n : layer) on0 += n == 0;
      CHECK(on0 == 12);
    }
  }
  // Threads wrap over fewer CPUs: workers counted per thread.
  {
    const MachineInfo m = fake_machine({1, 1});
    NumaPlacement p = plan_numa_placement(m, {0, 1}, 5, fake_layers(buf, 1, 4, 10), 4);
    REQUIRE(p.placed);
    CHECK(p.thread_node == std::vector<int>({0, 1, 0, 1, 0}));
    CHECK(p.workers_per_node == std::vector<int>({3, 2}));
  }
}

TEST(no_placement_where_it_cannot_help) {
  std::vector<uint8_t> buf;
  const MachineInfo one = fake_machine({4});
  NumaPlacement p = plan_numa_placement(one, {0, 1}, 2, fake_layers(buf, 1, 8, 10), 8);
  CHECK(!p.placed && p.reason == "1 NUMA node: no placement needed");
  json::Value d = json::Value::object();
  p.describe(d);
  CHECK(d["numa_nodes"].as_int() == 1);
  CHECK(d["first_touch"].as_string() == "1 NUMA node: no placement needed");

  const MachineInfo two = fake_machine({2, 2});
  p = plan_numa_placement(two, {}, 2, fake_layers(buf, 1, 8, 10), 8);
  CHECK(!p.placed && p.reason.find("not pinned") != std::string::npos);
  p = plan_numa_placement(two, {0, 1}, 2, fake_layers(buf, 1, 8, 10), 8);  // both on node 0
  CHECK(!p.placed && p.reason.find("on NUMA node 0") != std::string::npos);
  p = plan_numa_placement(two, {0, 2}, 2, {}, 0);
  CHECK(!p.placed && p.reason.find("no routed experts") != std::string::npos);
}

TEST(pool_refuses_a_view_that_does_not_fit) {
  ThreadPool pool(3);
  auto v = std::make_shared<PoolNuma>();
  v->n_nodes = 2;
  v->thread_node = {0, 1};  // too short for 3 threads
  CHECK(!pool.set_numa(v));
  CHECK(pool.numa() == nullptr);
  v->thread_node = {0, 1, 2};  // node out of range
  CHECK(!pool.set_numa(v));
  v->thread_node = {0, 1, 1};
  v->tables.push_back({nullptr, {0, 1, 2}});  // table names node 2
  CHECK(!pool.set_numa(v));
  v->tables.back().node = {0, 1, 1};
  CHECK(pool.set_numa(v));
  CHECK(pool.numa() == v.get());
}

TEST(strict_node_loops_run_tasks_only_on_their_node) {
  for (int threads : {2, 3, 4, 6}) {
    ThreadPool pool(threads);
    auto v = std::make_shared<PoolNuma>();
    v->n_nodes = 2;
    for (int t = 0; t < threads; ++t) v->thread_node.push_back(t % 2);
    REQUIRE(pool.set_numa(v));
    const int64_t node_begin[3] = {0, 37, 100};
    std::vector<std::atomic<int>> hits(100), wrong(100);
    for (auto& h : hits) h = 0;
    for (auto& w : wrong) w = 0;
    pool.parallel_for_nodes(node_begin, true, [&](int64_t task, int thread) {
      hits[task]++;
      const int node = task < 37 ? 0 : 1;
      if (v->thread_node[thread] != node) wrong[task]++;
    });
    int bad = 0, misplaced = 0;
    for (int i = 0; i < 100; ++i) {
      bad += hits[i].load() != 1;
      misplaced += wrong[i].load();
    }
    CHECK_MSG(bad == 0, "%d threads: %d tasks not run exactly once", threads, bad);
    CHECK_MSG(misplaced == 0, "%d threads: %d tasks ran off their node", threads, misplaced);
  }
}

TEST(node_loops_and_plain_loops_interleave) {
  // Node loops (strict or not, some nodes empty) back to back with plain
  // loops: every task once, no lost wake-up (a hang fails through ctest's timeout).
  ThreadPool pool(4);
  auto v = std::make_shared<PoolNuma>();
  v->n_nodes = 3;
  v->thread_node = {0, 1, 2, 1};
  REQUIRE(pool.set_numa(v));
  std::atomic<int64_t> sum{0};
  int64_t want = 0;
  for (int loop = 0; loop < 6000; ++loop) {
    const int n = 1 + loop % 7;
    if (loop % 3 == 0) {
      pool.parallel_for(n, [&](int64_t t, int) { sum += t; });
    } else {
      const int64_t a = loop % 4 == 0 ? 0 : n / 3;  // node 0 sometimes empty
      const int64_t node_begin[4] = {0, a, a + (n - a) / 2, n};
      pool.parallel_for_nodes(node_begin, loop % 5 == 0, [&](int64_t t, int) { sum += t; });
    }
    want += static_cast<int64_t>(n) * (n - 1) / 2;
  }
  CHECK(sum.load() == want);
}

TEST(each_thread_takes_its_own_nodes_task_first) {
  // Two threads on two nodes, one task per node; each task waits until both
  // have started, so the caller cannot run both: thread 0 takes node 0's and
  // thread 1 node 1's, whichever wakes first.
  ThreadPool pool(2);
  auto v = std::make_shared<PoolNuma>();
  v->n_nodes = 2;
  v->thread_node = {1, 0};  // the caller (thread 0) is on node 1
  REQUIRE(pool.set_numa(v));
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> started{0};
    int ran_on[2] = {-1, -1};
    const int64_t node_begin[3] = {0, 1, 2};
    pool.parallel_for_nodes(node_begin, false, [&](int64_t task, int thread) {
      ran_on[task] = thread;
      started++;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    });
    CHECK_MSG(ran_on[0] == 1 && ran_on[1] == 0, "round %d: node 0's task on thread %d, node 1's on %d", round,
              ran_on[0], ran_on[1]);
  }
}

TEST(first_touch_reads_every_expert_page_on_its_node) {
  std::vector<uint8_t> buf;
  const MachineInfo m = fake_machine({1, 1});
  ThreadPool pool(2);
  NumaPlacement p = plan_numa_placement(m, {0, 1}, 2, fake_layers(buf, 2, 4, 3 * 4096 + 100), 4);
  REQUIRE(p.placed);
  REQUIRE(pool.set_numa(p.pool_view()));
  first_touch_experts(pool, p, 0);
  CHECK(p.first_touch);
  CHECK(p.touched_bytes == buf.size());
  CHECK(p.resident_before_bytes <= p.touched_bytes);
  CHECK(p.on_assigned_node_bytes <= p.checked_bytes && p.checked_bytes <= p.touched_bytes);
  json::Value d = json::Value::object();
  p.describe(d);
  CHECK(d["first_touch"].as_string() == "ran");
  CHECK(d["workers_per_node"].size() == 2);
  CHECK(d["nodes"][0]["experts"].as_int() == 4 && d["nodes"][1]["experts"].as_int() == 4);
  CHECK(static_cast<uint64_t>(d["touched_bytes"].as_int()) == buf.size());

  // Too little RAM: nothing is touched and the detail says why.
  NumaPlacement q = plan_numa_placement(m, {0, 1}, 2, fake_layers(buf, 1, 4, 4096), 4);
  REQUIRE(q.placed);
  first_touch_experts(pool, q, 1000);
  CHECK(!q.first_touch && q.touched_bytes == 0);
  json::Value dq = json::Value::object();
  q.describe(dq);
  CHECK(dq["first_touch"].as_string().rfind("skipped:", 0) == 0);
}

TEST(fixture_expert_tensors_are_found) {
  std::string err;
  auto files = gguf::ModelFiles::open(check::fixtures_dir() + "/models/qwen3moe-a-Q8_0.gguf", &err);
  REQUIRE(files);
  const auto layers = find_expert_tensors(*files, 8);
  REQUIRE(layers.size() == 2);
  uint64_t bytes = 0;
  for (const auto& L : layers) {
    CHECK(L.data.size() == 3);
    bytes += 8 * L.bytes_per_expert();
  }
  CHECK_MSG(bytes == 835584, "expert bytes %llu", static_cast<unsigned long long>(bytes));  // stage 10's bytes
  CHECK(find_expert_tensors(*files, 7).empty());
}

// A model loaded on two fake nodes places its experts, records it in stage
// 6, and computes exactly the logits of the ordinary load, through both MoE
// scheduling paths (one task per expert; row chunks).
TEST(fake_two_node_load_is_bit_identical) {
  const std::string model = "qwen3moe-a-Q8_0.gguf";
  const std::vector<int32_t> prompt = {2501, 872, 198, 1639, 266, 374, 279, 2062, 2174, 315, 434,
                                       81,   681, 30,  2502, 198, 2501, 395, 380, 517, 198};
  unsetenv("GUILD_NUMA_FAKE_NODES");
  const bool one_node = detect_machine().numa_nodes.size() == 1;
  for (int threads : {2, 3, 5}) {
    auto plain = load_model(model, threads, nullptr);
    auto numa = load_model(model, threads, "2");
    REQUIRE(plain && numa);
    const json::Value pp = plain->profile().to_json();
    const json::Value np = numa->profile().to_json();
    const json::Value& d = stage(np, "expert_pool")["detail"];
    CHECK(np["machine"]["numa_nodes"].as_int() == 2);
    CHECK(d["numa_nodes"].as_int() == 2);
    CHECK_MSG(d["first_touch"].as_string() == "ran", "first_touch: %s", d["first_touch"].as_string().c_str());
    CHECK(d["nodes"].size() == 2);
    CHECK(d["nodes"][0]["experts"].as_int() + d["nodes"][1]["experts"].as_int() == 16);
    CHECK(d["nodes"][0]["bytes"].as_int() + d["nodes"][1]["bytes"].as_int() == 835584);
    CHECK(stage(np, "expert_pool")["bytes"].as_int() == 835584);
    REQUIRE(numa->pool().numa() != nullptr);
    CHECK(numa->pool().numa()->tables.size() == 6);
    // The bound experts are the placed tensors.
    for (const LayerWeights& L : numa->weights().layers) {
      if (!L.is_moe()) continue;
      CHECK(numa->pool().numa()->find(L.gate_exps.first.data) != nullptr);
      CHECK(numa->pool().numa()->find(L.up_exps.first.data) != nullptr);
      CHECK(numa->pool().numa()->find(L.down_exps.first.data) != nullptr);
    }
    if (one_node) {
      const json::Value& pd = stage(pp, "expert_pool")["detail"];
      CHECK(pd["first_touch"].as_string() == "1 NUMA node: no placement needed");
      CHECK(plain->pool().numa() == nullptr);
      CHECK(stage(pp, "expert_pool")["bytes"].as_int() == 0);
    }

    // Prefill (every expert active) then decode (k of 8 active).
    std::string err;
    auto a = GuildSession::create(*plain, 256, &err);
    auto b = GuildSession::create(*numa, 256, &err);
    REQUIRE(a && b);
    const int n_vocab = plain->hparams().n_vocab;
    std::vector<float> la(static_cast<size_t>(n_vocab) * prompt.size()), lb(la.size());
    REQUIRE(a->eval(prompt, true, la.data(), &err));
    REQUIRE(b->eval(prompt, true, lb.data(), &err));
    CHECK_MSG(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0, "%d threads: prefill logits differ",
              threads);
    int32_t tok = 0;
    int differ = 0;
    for (int step = 0; step < 12; ++step) {
      const float* last = la.data() + static_cast<size_t>(step == 0 ? prompt.size() - 1 : 0) * n_vocab;
      tok = static_cast<int32_t>(std::max_element(last, last + n_vocab) - last);
      REQUIRE(a->eval(std::span<const int32_t>(&tok, 1), false, la.data(), &err));
      REQUIRE(b->eval(std::span<const int32_t>(&tok, 1), false, lb.data(), &err));
      differ += std::memcmp(la.data(), lb.data(), static_cast<size_t>(n_vocab) * sizeof(float)) != 0;
    }
    CHECK_MSG(differ == 0, "%d threads: %d decode steps differ", threads, differ);
  }
}

// Stage 6 pins the loading thread (it is worker 0); a second load on the same
// thread must still see every CPU the thread had, not just the one it was
// pinned to (else the second model's workers would all share one CPU).
TEST(a_second_load_on_a_pinned_thread_sees_the_whole_machine) {
  std::thread([] {
    // Start from every CPU (the main thread may be pinned by earlier loads).
    cpu_set_t all;
    CPU_ZERO(&all);
    for (unsigned c = 0; c < std::thread::hardware_concurrency() && c < CPU_SETSIZE; ++c) CPU_SET(c, &all);
    REQUIRE(sched_setaffinity(0, sizeof(all), &all) == 0);
    auto first = load_model("qwen3moe-a-Q8_0.gguf", 2, nullptr);
    auto second = load_model("qwen3moe-a-Q8_0.gguf", 2, nullptr);
    REQUIRE(first && second);
    auto cpus_of = [](const GuildModel& m) {
      std::set<int64_t> s;
      const json::Value profile = m.profile().to_json();
      for (const json::Value& c : stage(profile, "device_policy")["detail"]["worker_cpus"].as_array())
        s.insert(c.as_int());
      return s;
    };
    const auto a = cpus_of(*first), b = cpus_of(*second);
    CHECK_MSG(a == b, "first load's workers on %zu CPUs, second's on %zu", a.size(), b.size());
    CHECK(a.size() == static_cast<size_t>(std::min<int>(2, static_cast<int>(std::thread::hardware_concurrency()))));
    CHECK(second->profile().to_json()["machine"]["numa"][0]["cpus"].size() ==
          first->profile().to_json()["machine"]["numa"][0]["cpus"].size());
  }).join();
}
