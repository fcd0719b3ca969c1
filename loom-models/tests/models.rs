//! Every model holds as `src/sync/` has it, and fails once its key ordering is weakened.

use loom_models::{
    bcast_fifo, check, claims, counter, deferred, p2p_fifo, private, round, split, Weakening, PREEMPTIONS,
    PREEMPTIONS_TWO_RANKS,
};

/// Runs `model` under loom and returns the message of the panic loom must find.
fn fails(model: fn(Weakening), w: Weakening) -> String {
    let caught = std::panic::catch_unwind(|| check(PREEMPTIONS, move || model(w)));
    let payload = caught.expect_err("loom found no failure in the weakened model");
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    eprintln!("{w:?}: loom reports: {message}");
    // A real failure, not a wait loom gave up on.
    assert!(!message.contains("maximum number of branches"), "{message}");
    message
}

/// Runs `model` as `src/sync/` has it, with `preemptions` as the bound; loom must find no
/// failure.
fn holds(name: &str, preemptions: usize, model: fn(Weakening)) {
    let start = std::time::Instant::now();
    let runs = check(preemptions, move || model(Weakening::None));
    eprintln!("{name}: {runs} interleavings in {:.2?}", start.elapsed());
}

#[test]
fn round_holds() {
    holds("round", PREEMPTIONS_TWO_RANKS, round::run);
}

#[test]
fn round_with_relaxed_stamp_fails() {
    fails(round::run, Weakening::PublishRelaxed);
}

#[test]
fn round_with_relaxed_stamp_poll_fails() {
    fails(round::run, Weakening::PollRelaxed);
}

#[test]
fn round_with_relaxed_done_fails() {
    fails(round::run, Weakening::DoneRelaxed);
}

#[test]
fn private_and_one_phase_rounds_hold() {
    holds("private", PREEMPTIONS_TWO_RANKS, private::run);
}

#[test]
fn one_phase_round_without_settle_fails() {
    fails(private::run, Weakening::NoSettle);
}

#[test]
fn one_phase_round_with_relaxed_stamp_fails() {
    fails(private::run, Weakening::PublishRelaxed);
}

#[test]
fn private_round_with_relaxed_done_fails() {
    fails(private::run, Weakening::DoneRelaxed);
}

#[test]
fn bcast_fifo_holds() {
    holds("bcast_fifo", PREEMPTIONS, bcast_fifo::run);
}

#[test]
fn bcast_fifo_with_relaxed_seq_fails() {
    fails(bcast_fifo::run, Weakening::PublishRelaxed);
}

#[test]
fn bcast_fifo_with_relaxed_seq_poll_fails() {
    fails(bcast_fifo::run, Weakening::PollRelaxed);
}

#[test]
fn bcast_fifo_with_relaxed_countdown_fails() {
    fails(bcast_fifo::run, Weakening::CountdownRelaxed);
}

#[test]
fn p2p_fifo_holds() {
    holds("p2p_fifo", PREEMPTIONS, p2p_fifo::run);
}

#[test]
fn p2p_fifo_with_relaxed_seq_fails() {
    fails(p2p_fifo::run, Weakening::PublishRelaxed);
}

#[test]
fn p2p_fifo_with_relaxed_head_fails() {
    fails(p2p_fifo::run, Weakening::HeadRelaxed);
}

#[test]
fn counters_hold() {
    holds("counter", PREEMPTIONS_TWO_RANKS, counter::run);
}

#[test]
fn counters_hold_with_two_readers() {
    holds("counter (two readers)", PREEMPTIONS, counter::run_two_readers);
}

#[test]
fn counters_with_two_readers_and_relaxed_completion_fail() {
    fails(counter::run_two_readers, Weakening::CompleteRelaxed);
}

#[test]
fn counters_with_relaxed_progress_fail() {
    fails(counter::run, Weakening::PublishRelaxed);
}

#[test]
fn counters_with_relaxed_completion_fail() {
    fails(counter::run, Weakening::CompleteRelaxed);
}

#[test]
fn deferred_verdict_holds() {
    holds("deferred", PREEMPTIONS_TWO_RANKS, deferred::run);
}

#[test]
fn deferred_verdict_passed_from_rank_to_rank_holds() {
    holds("deferred swap", PREEMPTIONS_TWO_RANKS, deferred::run_swap);
}

#[test]
fn deferred_verdict_with_two_records_fails() {
    fails(deferred::run, Weakening::TwoRecords);
}

#[test]
fn deferred_verdict_counting_agreed_failures_fails() {
    fails(deferred::run, Weakening::CountAgreed);
}

#[test]
fn deferred_verdict_with_an_unsettled_leave_fails() {
    fails(deferred::run, Weakening::LeaveUnsettled);
}

#[test]
fn deferred_verdict_of_a_rank_alone_holds() {
    holds("deferred alone", PREEMPTIONS_TWO_RANKS, deferred::run_alone);
}

#[test]
fn deferred_verdict_of_a_rank_alone_before_a_leave_holds() {
    holds("deferred alone, then a leave", PREEMPTIONS_TWO_RANKS, deferred::run_alone_leave);
}

#[test]
fn deferred_verdict_of_a_rank_alone_before_a_leave_judged_only_where_left_fails() {
    fails(deferred::run_alone_leave, Weakening::JudgeOnlyLeft);
}

#[test]
fn deferred_verdict_of_a_rank_alone_without_its_note_fails() {
    fails(deferred::run_alone, Weakening::NoAloneNote);
}

#[test]
fn deferred_verdict_without_learn_wait_fails() {
    fails(deferred::run, Weakening::NoLearnWait);
}

#[test]
fn deferred_verdict_with_relaxed_done_fails() {
    fails(deferred::run, Weakening::DoneRelaxed);
}

#[test]
fn deferred_verdict_with_status_after_done_fails() {
    fails(deferred::run, Weakening::StatusAfterDone);
}

#[test]
fn deferred_verdict_with_flags_after_stamp_fails() {
    fails(deferred::run, Weakening::FlagsAfterStamp);
}

#[test]
fn deferred_verdict_with_relaxed_stamp_fails() {
    fails(deferred::run, Weakening::PublishRelaxed);
}

#[test]
fn split_round_holds() {
    holds("split", PREEMPTIONS_TWO_RANKS, split::run);
    // Both orders were explored: the reader found the root's record at issue (and
    // copied there) in some interleavings, and ran the round in `wait` in others.
    let [issue, wait] = &split::PATHS;
    let (issue, wait) =
        (issue.load(std::sync::atomic::Ordering::Relaxed), wait.load(std::sync::atomic::Ordering::Relaxed));
    eprintln!("split: reader rounds run at issue {issue}, in wait {wait}");
    assert!(issue > 0 && wait > 0);
}

#[test]
fn split_round_with_relaxed_stamp_fails() {
    fails(split::run, Weakening::PublishRelaxed);
}

#[test]
fn split_round_with_relaxed_stamp_poll_fails() {
    fails(split::run, Weakening::PollRelaxed);
}

#[test]
fn split_round_with_relaxed_done_fails() {
    fails(split::run, Weakening::DoneRelaxed);
}

#[test]
fn split_round_whose_giver_skips_the_end_fails() {
    fails(split::run, Weakening::GiverSkipsEnd);
}

#[test]
fn staged_split_round_holds() {
    holds("split (staged)", PREEMPTIONS_TWO_RANKS, split::run_staged);
}

#[test]
fn staged_split_round_with_relaxed_step_fails() {
    fails(split::run_staged, Weakening::PublishRelaxed);
}

#[test]
fn staged_split_round_with_relaxed_done_fails() {
    fails(split::run_staged, Weakening::DoneRelaxed);
}

#[test]
fn staged_split_round_whose_giver_skips_the_end_fails() {
    fails(split::run_staged, Weakening::GiverSkipsEnd);
}

#[test]
fn claims_hold() {
    holds("claims", PREEMPTIONS_TWO_RANKS, claims::run);
}

#[test]
fn claims_not_atomic_fail() {
    fails(claims::run, Weakening::ClaimNotAtomic);
}

#[test]
fn claims_never_opened_fail() {
    fails(claims::run, Weakening::NoOpen);
}

#[test]
fn claims_with_relaxed_done_fail() {
    fails(claims::run, Weakening::DoneRelaxed);
}
