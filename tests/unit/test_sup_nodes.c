/* Unit tests of the supervisor as one node of a job of several
 * (ckptrun/sup/sup_nodes.c), under the fake clock and world of fake_sup.h: the
 * nodes' thread is a view the test writes (W.nv) and the store objects it
 * would write are recorded (W.empty, W.posted). What the node decides by
 * time -- when another node's part asks for this node's empty part, how
 * long a node whose trainer ended stays for the others, since when entries
 * answer a stop begun on another node -- is checked without sleeping. */
#include <signal.h>
#include "fake_sup.h"
#include "base/runlog.h"
#include "sup/stop.h"
#include "sup/sup_events.h"
#include "sup/sup_nodes.h"

/* Stands in for the nodes' thread: never dereferenced, since every call
 * of the code under test goes through the seam. */
static int64_t g_nodes_stand_in;

/* sup_new() as node `rank` of a job of `nnodes`, as sup_nodes_start leaves
 * it (its thread started). */
static struct sup *node_new(unsigned rank, unsigned nnodes)
{
    struct sup *s = sup_new();

    s->nid.rank = rank;
    s->nid.nnodes = nnodes;
    s->ns = (struct nodesync *)&g_nodes_stand_in;
    s->nv.global_step = -1;
    s->stop_begun = sup_nodes_stop_begun;
    W.nv.global_step = -1;
    return s;
}

/* The nodes' thread learnt something: the loop is woken. */
static void nodes_wake(struct sup *s)
{
    int before = W.nviews;
    sup_on_notices(s);
    assert_int_equal(W.nviews, before + 1);
}

/* Node 1's trainer ends: the node stays for a whole poll of the store
 * since, then as long as a step waits for parts, and never past --grace
 * after the end. */
static void test_node_stays_for_the_others(void **state)
{
    struct sup *s = node_new(1, 2);
    (void)state;

    W.nv.seq = 5;
    nodes_wake(s);
    move_to(T0 + 1000);
    child_exits(s, EXITED(0));
    assert_false(sup_loop_done(s)); /* no poll since the end */
    W.nv.seq = 6;
    nodes_wake(s);
    assert_false(sup_loop_done(s)); /* a poll begun before the end may not count */
    W.nv.seq = 7;
    W.nv.npending = 1;
    W.nv.pending[0] = (struct nodesync_pending){ 12, 1, 1, WALL0 };
    nodes_wake(s);
    assert_false(sup_loop_done(s)); /* step 12 waits for node 0's part */
    move_to(T0 + 1000 + 30000 - 1);
    assert_false(sup_loop_done(s));
    move_to(T0 + 1000 + 30000); /* --grace after the end */
    assert_true(sup_loop_done(s));
}

static void test_node_leaves_when_nothing_waits(void **state)
{
    struct sup *s = node_new(1, 2);
    (void)state;

    move_to(T0 + 1000);
    child_exits(s, EXITED(0));
    assert_false(sup_loop_done(s));
    W.nv.seq = 2;
    W.nv.global_step = 12;
    nodes_wake(s);
    assert_int_equal(s->last_step, 12); /* node 0 committed step 12 */
    assert_int_equal(W.noted, 12);      /* and the watch knows it */
    assert_true(sup_loop_done(s));
}

/* Another node wrote its part of step 10 and this node has nothing of it:
 * its empty part is written once the other part is 2 s old, the watch is
 * idle and holds no entry of that step -- once. */
static void test_empty_part_for_another_nodes_step(void **state)
{
    struct sup *s = node_new(1, 2);
    (void)state;

    W.nv.seq = 1;
    W.nv.npending = 1;
    W.nv.pending[0] = (struct nodesync_pending){ 10, 1, 0, WALL0 };
    move_to(T0 + 1999);
    nodes_wake(s);
    assert_int_equal(W.nempty, 0); /* too young: this node may be saving it */
    move_to(T0 + 2000);
    W.busy = 1;
    nodes_wake(s);
    assert_int_equal(W.nempty, 0); /* an entry is settling or committing */
    W.busy = 0;
    W.has_step = 10;
    nodes_wake(s);
    assert_int_equal(W.nempty, 0); /* the watch holds an entry of step 10 */
    W.has_step = 0;
    nodes_wake(s);
    assert_int_equal(W.nempty, 1);
    assert_int_equal(W.empty[0], 10);
    nodes_wake(s);
    assert_int_equal(W.nempty, 1); /* asked once */
}

/* Node 0 began a stop 3 s before node 1 polled it: node 1 stops too, and
 * its entries changed since the stop began there answer it. A stop begun
 * here is posted for the others; one from another node is not. */
static void test_stop_from_another_node(void **state)
{
    struct sup *s = node_new(1, 2);
    (void)state;

    lib_connects(s);
    move_to(T0 + 5000);
    W.nv.seq = 3;
    W.nv.stop_seen = 1;
    W.nv.stop_node = 0;
    snprintf(W.nv.stop_reason, sizeof W.nv.stop_reason, "notice aws");
    W.nv.stop_deadline_ms = WALL0 + 120000;
    W.nv.stop_time_ms = WALL0 + 2000;
    nodes_wake(s);
    assert_int_not_equal(s->stop.phase, P_RUN);
    assert_int_equal(s->stop.t_accept, T0 + 2000);
    assert_int_equal(s->stop_ref_ms, WALL0 + 2000);
    assert_int_equal(W.fast, 1);       /* the nodes' thread polls often now */
    assert_string_equal(W.posted, ""); /* node 0's own */
    teardown(NULL);

    s = node_new(1, 2);
    lib_connects(s);
    move_to(T0 + 5000);
    notice(s, WALL0 + 120000);
    assert_int_not_equal(s->stop.phase, P_RUN);
    assert_int_equal(s->stop.t_accept, T0 + 5000);
    assert_non_null(strstr(W.posted, "aws"));
    assert_int_equal(W.posted_deadline, WALL0 + 120000); /* the notice's: each node its margin */
    assert_int_equal(W.fast, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_node_stays_for_the_others, teardown),
        cmocka_unit_test_teardown(test_node_leaves_when_nothing_waits, teardown),
        cmocka_unit_test_teardown(test_empty_part_for_another_nodes_step, teardown),
        cmocka_unit_test_teardown(test_stop_from_another_node, teardown),
    };
    unsetenv("SLURM_JOB_ID");
    unsetenv("CKPT_WARN_NO_CHECKPOINT");
    log_setup(0, -1); /* warnings and errors only */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
