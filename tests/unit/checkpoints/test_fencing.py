"""A checkpoint is fenced by the committed attempts of the inputs it was taken against."""

from airflow_ft_provider.checkpoints.fencing import CompletedCheckpoint, Why, restore_decision

CHK = CompletedCheckpoint(14, {"cleaned[0]": "a1", "cleaned[1]": "b1"}, 700, 1000, taken_by_try=1)


def test_the_same_inputs_resume_and_say_how_much_is_not_read_again():
    decision = restore_decision(CHK, {"cleaned[0]": "a1", "cleaned[1]": "b1"}, pipelined_input=False)
    assert decision.resume and decision.checkpoint is CHK
    assert decision.explain("score", 2) == (
        "score try 2 resumed at checkpoint 14: 70 % of the input is not read again (taken by try 1)"
    )


def test_an_input_rebuilt_by_failover_starts_fresh_and_names_it():
    decision = restore_decision(CHK, {"cleaned[0]": "a1", "cleaned[1]": "b2"}, pipelined_input=False)
    assert decision.why is Why.INPUT_CHANGED and decision.changed == ("cleaned[1]",)
    assert "other committed attempts of cleaned[1]" in decision.explain("score", 3)
    # An input added or gone is a change too.
    assert restore_decision(CHK, {"cleaned[0]": "a1"}, pipelined_input=False).changed == ("cleaned[1]",)


def test_no_checkpoint_or_a_pipelined_input_start_fresh():
    assert restore_decision(None, {}, pipelined_input=False).why is Why.NO_CHECKPOINT
    decision = restore_decision(CHK, dict(CHK.inputs), pipelined_input=True)
    assert decision.why is Why.PIPELINED_INPUT and not decision.resume
    assert "restarts as a whole" in decision.explain("score", 2)
