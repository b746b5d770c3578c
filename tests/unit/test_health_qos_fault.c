/* QoS tiers (SPEC H5), fault-injection plans (SPEC H6) and the CPU meter of
 * check-ins: parsing, the budget table, plan queries, seeded random steps,
 * every kind of bad spec with the token it names, allocation failures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "health/health_internal.h"
#include "test_util.h"

static void test_qos_parse_and_budgets(void **state) {
  (void)state;
  sg_qos q;
  static const struct {
    const char *text;
    sg_qos want;
  } ok[] = {{"strict", SG_QOS_STRICT},
            {"STRICT", SG_QOS_STRICT},
            {"best-effort", SG_QOS_BEST_EFFORT},
            {"Best_Effort", SG_QOS_BEST_EFFORT},
            {"graceful-degrade", SG_QOS_GRACEFUL_DEGRADE},
            {"graceful_degrade", SG_QOS_GRACEFUL_DEGRADE}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    assert_status(sg_qos_parse(ok[i].text, &q), SG_OK, NULL);
    assert_int_equal(q, ok[i].want);
  }
  static const char *bad[] = {"", "strictly", "best effort", "besteffort", "graceful", " strict"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_status(sg_qos_parse(bad[i], &q), SG_ERR_INVALID_ARG,
                  "accepted values are strict, best-effort, graceful-degrade");
  assert_status(sg_qos_parse(NULL, &q), SG_ERR_INVALID_ARG, "NULL");

  /* SPEC H5's numbers. */
  static const struct {
    sg_qos q;
    const char *name;
    int budget, retries;
    sg_qos_on_failure on;
  } table[] = {{SG_QOS_STRICT, "strict", 50, 0, SG_QOS_ABORT_RECOVER_REDO},
               {SG_QOS_BEST_EFFORT, "best-effort", 200, 2, SG_QOS_RETRY_THEN_RECOVER},
               {SG_QOS_GRACEFUL_DEGRADE, "graceful-degrade", 800, 0, SG_QOS_CONTINUE_DEGRADED}};
  for (size_t i = 0; i < 3; i++) {
    sg_qos_budget b;
    assert_status(sg_qos_budget_of(table[i].q, &b), SG_OK, NULL);
    assert_int_equal(b.qos, table[i].q);
    assert_string_equal(b.name, table[i].name);
    assert_string_equal(sg_qos_name(table[i].q), table[i].name);
    assert_int_equal(b.collective_budget_ms, table[i].budget);
    assert_int_equal(b.retries, table[i].retries);
    assert_int_equal(b.on_failure, table[i].on);
    assert_true(strlen(b.on_failure_text) > 20);
  }
  sg_qos_budget b;
  assert_status(sg_qos_budget_of((sg_qos)3, &b), SG_ERR_INVALID_ARG, "3 is not a QoS tier");
  assert_string_equal(sg_qos_name((sg_qos)-1), "?");
}

static void test_qos_from_env(void **state) {
  (void)state;
  sg_qos q;
  unsetenv("SG_QOS");
  assert_status(sg_qos_from_env(SG_QOS_BEST_EFFORT, &q), SG_OK, NULL);
  assert_int_equal(q, SG_QOS_BEST_EFFORT);
  setenv("SG_QOS", "", 1);
  assert_status(sg_qos_from_env(SG_QOS_STRICT, &q), SG_OK, NULL);
  assert_int_equal(q, SG_QOS_STRICT);
  setenv("SG_QOS", "graceful-degrade", 1);
  assert_status(sg_qos_from_env(SG_QOS_STRICT, &q), SG_OK, NULL);
  assert_int_equal(q, SG_QOS_GRACEFUL_DEGRADE);
  setenv("SG_QOS", "fast", 1);
  assert_status(sg_qos_from_env(SG_QOS_STRICT, &q), SG_ERR_INVALID_ARG,
                "SG_QOS='fast' is not a QoS tier: accepted values are strict, best-effort, graceful-degrade");
  assert_status(sg_qos_from_env((sg_qos)9, &q), SG_ERR_INVALID_ARG, "fallback 9");
  unsetenv("SG_QOS");
}

static sg_fault fault_at(const sg_fault_plan *p, size_t i) {
  sg_fault f;
  assert_status(sg_fault_plan_get(p, i, &f), SG_OK, NULL);
  return f;
}

static void test_fault_plan_parse_and_query(void **state) {
  (void)state;
  sg_fault_plan *p;
  assert_status(sg_fault_plan_parse("kill:rank=1,step=10; stop:rank=2,step=12 ;drop-heartbeats:step=3,rank=0;"
                                    "partition:ranks=3-1,step=20;device: rank = 2 , step = 7",
                                    4, 0, &p),
                SG_OK, NULL);
  assert_int_equal(sg_fault_plan_count(p), 5);
  sg_fault f = fault_at(p, 0);
  assert_int_equal(f.kind, SG_FAULT_KILL);
  assert_int_equal(f.rank, 1);
  assert_int_equal(f.peer, -1);
  assert_int_equal(f.step, 10);
  assert_false(f.random);
  assert_int_equal(fault_at(p, 1).kind, SG_FAULT_STOP);
  f = fault_at(p, 2);
  assert_int_equal(f.kind, SG_FAULT_DROP_HEARTBEATS);
  assert_int_equal(f.step, 3);
  f = fault_at(p, 3);
  assert_int_equal(f.kind, SG_FAULT_PARTITION);
  assert_int_equal(f.rank, 3);
  assert_int_equal(f.peer, 1);
  f = fault_at(p, 4);
  assert_int_equal(f.kind, SG_FAULT_DEVICE);
  assert_int_equal(f.rank, 2);
  assert_int_equal(f.step, 7);
  assert_status(sg_fault_plan_get(p, 5, &f), SG_ERR_RANGE, "the plan has 5");

  /* due: exactly at the step, both ends of a partition. */
  sg_fault due[4];
  assert_int_equal(sg_fault_plan_due(p, 1, 10, due, 4), 1);
  assert_int_equal(due[0].kind, SG_FAULT_KILL);
  assert_int_equal(sg_fault_plan_due(p, 1, 11, due, 4), 0);
  assert_int_equal(sg_fault_plan_due(p, 1, 20, due, 4), 1);
  assert_int_equal(due[0].kind, SG_FAULT_PARTITION);
  assert_int_equal(sg_fault_plan_due(p, 3, 20, NULL, 0), 1);
  assert_int_equal(sg_fault_plan_due(p, 0, 20, due, 4), 0);
  /* cuts: from the step on, either direction, only that pair. */
  assert_false(sg_fault_plan_cuts(p, 1, 3, 19));
  assert_true(sg_fault_plan_cuts(p, 1, 3, 20));
  assert_true(sg_fault_plan_cuts(p, 3, 1, 1000));
  assert_false(sg_fault_plan_cuts(p, 1, 2, 1000));
  assert_false(sg_fault_plan_cuts(p, 3, 3, 1000));
  /* active: stays in effect after firing. */
  assert_false(sg_fault_plan_active(p, SG_FAULT_DROP_HEARTBEATS, 0, 2));
  assert_true(sg_fault_plan_active(p, SG_FAULT_DROP_HEARTBEATS, 0, 3));
  assert_true(sg_fault_plan_active(p, SG_FAULT_DROP_HEARTBEATS, 0, 50));
  assert_false(sg_fault_plan_active(p, SG_FAULT_DROP_HEARTBEATS, 1, 50));
  assert_true(sg_fault_plan_active(p, SG_FAULT_PARTITION, 1, 20));
  assert_false(sg_fault_plan_active(p, SG_FAULT_PARTITION, 2, 20));
  /* link_ms: the partition above is for good (0). */
  assert_int_equal(sg_fault_plan_link_ms(p, 1, 3, 20), 0);
  sg_fault_plan_destroy(p);
  /* A transient cut: ms=T, for that pair (either direction) at that step only. */
  assert_status(
      sg_fault_plan_parse("partition:ranks=1-2,step=5,ms=150; partition:ranks=0-3,step=5", 4, 0, &p), SG_OK,
      NULL);
  assert_int_equal(sg_fault_plan_link_ms(p, 1, 2, 5), 150);
  assert_int_equal(sg_fault_plan_link_ms(p, 2, 1, 5), 150);
  assert_int_equal(sg_fault_plan_link_ms(p, 1, 2, 6), 0);
  assert_int_equal(sg_fault_plan_link_ms(p, 0, 3, 5), 0);
  assert_int_equal(sg_fault_plan_link_ms(p, 1, 1, 5), 0);
  assert_int_equal(sg_fault_plan_link_ms(NULL, 1, 2, 5), 0);
  sg_fault_plan_destroy(p);
  /* slow: the factor of the latest slow fault fired by the step, 1 before and for other ranks. */
  assert_status(sg_fault_plan_parse("slow:rank=2,step=3,factor=10; slow:rank=2,step=7,factor=2.5", 4, 0, &p),
                SG_OK, NULL);
  assert_string_equal(sg_fault_kind_name(SG_FAULT_SLOW), "slow");
  assert_true(sg_fault_plan_slow_factor(p, 2, 2) == 1.0);
  assert_true(sg_fault_plan_slow_factor(p, 2, 3) == 10.0);
  assert_true(sg_fault_plan_slow_factor(p, 2, 6) == 10.0);
  assert_true(sg_fault_plan_slow_factor(p, 2, 7) == 2.5);
  assert_true(sg_fault_plan_slow_factor(p, 1, 7) == 1.0);
  assert_true(sg_fault_plan_slow_factor(NULL, 2, 7) == 1.0);
  sg_fault_plan_destroy(p);

  /* A kill in a phase of a recovery: never due at a step, due once the rank
   * reaches that phase; a step fault is never due in a recovery. */
  assert_status(sg_fault_plan_parse("kill:rank=1,step=5; kill:rank=3,recovery=agree", 4, 0, &p), SG_OK, NULL);
  sg_fault rf;
  assert_status(sg_fault_plan_get(p, 1, &rf), SG_OK, NULL);
  assert_int_equal(rf.kind, SG_FAULT_KILL);
  assert_int_equal(rf.rank, 3);
  assert_int_equal(rf.phase, SG_RECOVERY_AGREE);
  assert_int_equal(sg_fault_plan_due(p, 3, 5, NULL, 0), 0);
  assert_int_equal(sg_fault_plan_due(p, 3, INT64_MAX - 1, NULL, 0), 0);
  assert_false(sg_fault_plan_active(p, SG_FAULT_KILL, 3, INT64_MAX - 1));
  assert_int_equal(sg_fault_plan_due_in_recovery(p, 3, SG_RECOVERY_DETECT, NULL, 0), 0);
  assert_int_equal(sg_fault_plan_due_in_recovery(p, 3, SG_RECOVERY_AGREE, due, 4), 1);
  assert_int_equal(due[0].rank, 3);
  assert_int_equal(sg_fault_plan_due_in_recovery(p, 1, SG_RECOVERY_AGREE, NULL, 0), 0);
  assert_int_equal(sg_fault_plan_due_in_recovery(p, 1, SG_RECOVERY_NONE, NULL, 0), 0);
  assert_int_equal(sg_fault_plan_due(p, 1, 5, NULL, 0), 1);
  sg_fault_plan_destroy(p);
  assert_string_equal(sg_recovery_phase_name(SG_RECOVERY_TRANSFER), "transfer");
  assert_status(sg_fault_plan_parse("kill:rank=2,at=create", 4, 0, &p), SG_OK, NULL);
  assert_int_equal(sg_fault_plan_due_in_recovery(p, 2, SG_RECOVERY_CREATE, NULL, 0), 1);
  assert_int_equal(sg_fault_plan_due(p, 2, 0, NULL, 0), 0);
  sg_fault_plan_destroy(p);
  assert_string_equal(sg_recovery_phase_name((sg_recovery_phase)9), "?");

  /* NULL plans answer "nothing". */
  assert_int_equal(sg_fault_plan_count(NULL), 0);
  assert_int_equal(sg_fault_plan_due_in_recovery(NULL, 0, SG_RECOVERY_AGREE, NULL, 0), 0);
  assert_int_equal(sg_fault_plan_due(NULL, 0, 0, NULL, 0), 0);
  assert_false(sg_fault_plan_cuts(NULL, 0, 1, 0));
  assert_false(sg_fault_plan_active(NULL, SG_FAULT_KILL, 0, 0));
  sg_fault_plan_destroy(NULL);
  assert_string_equal(sg_fault_kind_name(SG_FAULT_DROP_HEARTBEATS), "drop-heartbeats");
  assert_string_equal(sg_fault_kind_name((sg_fault_kind)0), "?");

  /* hang (SPEC H7): a rank and a step, fixed or drawn, like the others. */
  assert_status(sg_fault_plan_parse("hang:rank=2,step=random(3-6);hang:rank=1,step=4", 4, 9, &p), SG_OK,
                NULL);
  f = fault_at(p, 0);
  assert_int_equal(f.kind, SG_FAULT_HANG);
  assert_int_equal(f.rank, 2);
  assert_true(f.random);
  assert_true(f.step >= 3 && f.step <= 6);
  assert_int_equal(fault_at(p, 1).step, 4);
  assert_int_equal(sg_fault_plan_due(p, 1, 4, NULL, 0), 1);
  assert_string_equal(sg_fault_kind_name(SG_FAULT_HANG), "hang");
  assert_string_equal(sg_fault_kind_name(SG_FAULT_BEHIND), "behind");
  assert_string_equal(sg_fault_kind_name(SG_FAULT_DROP_CHECKINS), "drop-checkins");
  sg_fault_plan_destroy(p);
  assert_status(sg_fault_plan_parse("hang:ranks=1-2,step=3", 4, 0, &p), SG_ERR_INVALID_ARG,
                "unknown key 'ranks' (hang takes rank and step)");
}

static int64_t random_step(const char *spec, uint64_t seed) {
  sg_fault_plan *p;
  assert_status(sg_fault_plan_parse(spec, 4, seed, &p), SG_OK, NULL);
  sg_fault f = fault_at(p, 0);
  assert_true(f.random);
  sg_fault_plan_destroy(p);
  return f.step;
}

static void test_fault_random_steps(void **state) {
  (void)state;
  /* Same seed, same step; steps inside the range; different seeds spread. */
  int64_t a = random_step("kill:rank=1,step=random", 42);
  assert_int_equal(a, random_step("kill:rank=1,step=random", 42));
  bool seen[101] = {false};
  int distinct = 0;
  for (uint64_t seed = 0; seed < 200; seed++) {
    int64_t s = random_step("kill:rank=1,step=random", seed);
    assert_true(s >= 1 && s <= 100);
    if (!seen[s]) distinct++;
    seen[s] = true;
    int64_t t = random_step("stop:rank=0,step=random(30-35)", seed);
    assert_true(t >= 30 && t <= 35);
  }
  assert_true(distinct > 50);
  assert_int_equal(random_step("device:rank=3,step=random(9-9)", 7), 9);
  /* A fault's draw does not depend on the faults after it. */
  sg_fault_plan *p;
  assert_status(sg_fault_plan_parse("kill:rank=1,step=random;stop:rank=2,step=random", 4, 42, &p), SG_OK,
                NULL);
  assert_int_equal(fault_at(p, 0).step, a);
  sg_fault_plan_destroy(p);
}

static void test_fault_bad_specs(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    const char *needle;
  } bad[] = {
      {"", "empty"},
      {"   ", "empty"},
      {"kil:rank=1,step=2", "fault 1 'kil:rank=1,step=2': unknown fault kind 'kil' (accepted: kill, stop, "
                            "drop-heartbeats, partition, device, hang, behind, drop-checkins, slow)"},
      {"kill", "no ':'"},
      {"kill:rank=1,step=2;", "an empty fault"},
      {"kill:rank=1,step=2;;stop:rank=0,step=1", "fault 2 '': an empty fault (a stray ';'?)"},
      {"kill:rank=1", "step= is missing"},
      {"kill:step=1", "rank= is missing"},
      {"kill:rank=1,step=2,rank=1", "rank= given twice"},
      {"kill:rank=1,step=2,step=3", "step= given twice"},
      {"kill:rank=4,step=2", "rank=4 is outside the job of 4 ranks (0..3)"},
      {"kill:rank=-1,step=2", "rank='-1' is not a rank number"},
      {"kill:rank=1x,step=2", "rank='1x'"},
      {"kill:rank=,step=2", "rank=''"},
      {"kill:rank=1,step=-2", "step='-2' is neither"},
      {"kill:rank=1,step=1e3", "step='1e3'"},
      {"kill:rank=1,step=9999999999999999999", "step='9999999999999999999'"},
      {"kill:rank=1,step=random(5-2)", "random(LO-HI) with LO <= HI"},
      {"kill:rank=1,step=random(5)", "random(LO-HI)"},
      {"kill:rank=1,step=randomly", "step='randomly'"},
      {"kill:ranks=1-2,step=2", "unknown key 'ranks' (kill takes rank and step, or recovery or at)"},
      {"kill:rank=1,at=start", "at='start' is not a point (accepted: create)"},
      {"kill:rank=1,recovery=create", "recovery='create' is not a phase"},
      {"kill:rank=1,at=create,recovery=agree", "recovery= or at= given twice"},
      {"kill:rank=1,recovery=later",
       "recovery='later' is not a phase (accepted: detect, agree, build, transfer)"},
      {"kill:rank=1,recovery=agree,step=3", "step= and recovery=/at= given together"},
      {"kill:rank=1,recovery=agree,recovery=build", "recovery= or at= given twice"},
      {"stop:rank=1,recovery=agree", "unknown key 'recovery' (stop takes rank and step)"},
      {"kill:rank=1,recovery=agree;kill:rank=1,recovery=agree", "the same fault as fault 1"},
      {"partition:rank=1,step=2",
       "unknown key 'rank' (partition takes ranks and step, and ms for a transient cut)"},
      {"partition:ranks=1-2,step=2,ms=0", "ms='0' is not a duration in 1..86400000 ms"},
      {"partition:ranks=1-2,step=2,ms=86400001", "ms='86400001' is not a duration"},
      {"partition:ranks=1-2,step=2,ms=x", "ms='x' is not a duration"},
      {"partition:ranks=1-2,step=2,ms=5,ms=6", "ms= given twice"},
      {"kill:rank=1,step=2,ms=5", "unknown key 'ms'"},
      {"slow:rank=1,step=2", "factor= is missing"},
      {"slow:rank=1,step=2,factor=1", "factor='1' is not a number in (1, 100]"},
      {"slow:rank=1,step=2,factor=101", "factor='101' is not"},
      {"slow:rank=1,step=2,factor=-3", "factor='-3' is not"},
      {"slow:rank=1,step=2,factor=2x", "factor='2x' is not"},
      {"slow:rank=1,step=2,factor=2,factor=3", "factor= given twice"},
      {"kill:rank=1,step=2,factor=2", "unknown key 'factor'"},
      {"partition:ranks=1,step=2", "ranks='1': expected two ranks A-B"},
      {"partition:ranks=2-2,step=2", "ranks=2-2: a rank has no link to itself"},
      {"partition:ranks=1-7,step=2", "ranks=7 is outside"},
      {"kill:rank=1,,step=2", "an empty parameter"},
      {"kill:rank=1,step", "parameter 'step' has no '='"},
      {"kill:rank=1,step=2;kill:rank=1,step=2", "fault 2 'kill:rank=1,step=2': the same fault as fault 1"},
      {"partition:ranks=0-1,step=2;partition:ranks=1-0,step=2", "the same fault as fault 1"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sg_fault_plan *p = (sg_fault_plan *)1;
    assert_status(sg_fault_plan_parse(bad[i].spec, 4, 0, &p), SG_ERR_INVALID_ARG, bad[i].needle);
    assert_null(p);
  }
  sg_fault_plan *p;
  assert_status(sg_fault_plan_parse(NULL, 4, 0, &p), SG_ERR_INVALID_ARG, "spec is NULL");
  assert_status(sg_fault_plan_parse("kill:rank=0,step=1", 0, 0, &p), SG_ERR_INVALID_ARG, "world_size 0");
  assert_status(sg_fault_plan_parse("kill:rank=0,step=1", 4, 0, NULL), SG_ERR_INVALID_ARG, "out is NULL");
  /* Size limits: 256 faults pass, 257 do not; over 64 KiB does not. */
  size_t cap = 300 * 32;
  char *big = malloc(cap);
  assert_non_null(big);
  size_t len = 0;
  for (int i = 0; i < 257; i++)
    len += (size_t)snprintf(big + len, cap - len, "%skill:rank=0,step=%d", i ? ";" : "", i);
  assert_status(sg_fault_plan_parse(big, 4, 0, &p), SG_ERR_INVALID_ARG, "more than 256 faults");
  *strrchr(big, ';') = '\0';
  assert_status(sg_fault_plan_parse(big, 4, 0, &p), SG_OK, NULL);
  assert_int_equal(sg_fault_plan_count(p), 256);
  sg_fault_plan_destroy(p);
  free(big);
  big = malloc(70000);
  assert_non_null(big);
  memset(big, ' ', 69999);
  big[69999] = '\0';
  assert_status(sg_fault_plan_parse(big, 4, 0, &p), SG_ERR_INVALID_ARG, "longer than 65536 bytes");
  free(big);
}

static void test_fault_alloc_failure(void **state) {
  (void)state;
  sg_fault_plan *p = NULL;
  sg__alloc_fail_after(0);
  sg_status st = sg_fault_plan_parse("kill:rank=0,step=1", 2, 0, &p);
  sg__alloc_fail_after(-1);
  assert_int_equal(st, SG_ERR_NO_MEMORY);
  assert_null(p);
  assert_non_null(strstr(sg_last_error(), "out of memory"));
}

static void test_cpu_meter(void **state) {
  (void)state;
  /* The command name may hold spaces and ')': fields count from the last ')'. */
  const char line[] = "4242 (we) ird (name) R 1 2 3 4 5 6 7 8 9 10 120 30 -1 -2 20 0 1 0 98765 1 2 3\n";
  uint64_t ticks, start;
  assert_status(sg__health_parse_stat(line, strlen(line), &ticks, &start), SG_OK, NULL);
  assert_int_equal(ticks, 150);
  assert_int_equal(start, 98765);
  assert_status(sg__health_parse_stat("no parens", 9, &ticks, &start), SG_ERR_FORMAT, "no ')'");
  const char cut[] = "1 (x) R 1 2 3 4 5 6 7 8 9 10 120";
  assert_status(sg__health_parse_stat(cut, strlen(cut), &ticks, &start), SG_ERR_FORMAT, "cannot read");
  const char neg[] = "1 (x) R 1 2 3 4 5 6 7 8 9 10 -5 30 -1 -2 20 0 1 0 98765";
  assert_status(sg__health_parse_stat(neg, strlen(neg), &ticks, &start), SG_ERR_FORMAT, "cannot read");
  /* 50 ticks of 100/s = 0.5 s of CPU in 1 s on 2 CPUs: 250 per mille. */
  assert_int_equal(sg__health_permille(50, 1000, 100, 2), 250);
  assert_int_equal(sg__health_permille(400, 1000, 100, 2), 1000); /* clamped */
  assert_int_equal(sg__health_permille(1, 0, 100, 2), 0);
  assert_int_equal(sg__health_permille(UINT64_MAX, 1, 100, 1), 1000);

  /* The real thing: busy for ~150 ms of CPU, then the meter sees some use. */
  sg_cpu_meter m = SG_CPU_METER_INIT;
  unsigned pm = 9999;
  assert_status(sg_health_cpu_permille(&m, &pm), SG_OK, NULL);
  assert_true(pm <= 1000);
  assert_true(m.valid);
  clock_t c0 = clock();
  volatile uint64_t x = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    for (int i = 0; i < 100000; i++) x += (uint64_t)i * i;
    clock_gettime(CLOCK_MONOTONIC, &t1);
  } while (clock() - c0 < CLOCKS_PER_SEC / 6 ||
           (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 150);
  assert_true(x > 0); /* the work was done */
  assert_status(sg_health_cpu_permille(&m, &pm), SG_OK, NULL);
  assert_true(pm >= 1 && pm <= 1000);
  /* At once again: too soon to measure, the same answer. */
  unsigned again;
  assert_status(sg_health_cpu_permille(&m, &again), SG_OK, NULL);
  assert_int_equal(again, pm);
  assert_status(sg_health_cpu_permille(NULL, &pm), SG_ERR_INVALID_ARG, "NULL");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_qos_parse_and_budgets),
      cmocka_unit_test(test_qos_from_env),
      cmocka_unit_test(test_fault_plan_parse_and_query),
      cmocka_unit_test(test_fault_random_steps),
      cmocka_unit_test(test_fault_bad_specs),
      cmocka_unit_test(test_fault_alloc_failure),
      cmocka_unit_test(test_cpu_meter),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
