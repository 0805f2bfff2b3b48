"""The server logs each finished request's speed and, with drafters, tokens per step and acceptance."""

import logging

from ninfer_server.worker import _log_stats


def test_speculative_stats_are_logged_and_recorded(caplog):
    record = {}
    stats = {"prompt_tokens": 10, "prefill_tok_s": 100.0, "generated_tokens": 30, "decode_tok_s": 50.0,
             "verify_steps": 10, "drafted_tokens": 40, "accepted_tokens": 20}
    with caplog.at_level(logging.INFO, logger="ninfer.server"):
        _log_stats("r1", stats, record)
    assert record == {"tokens_per_step": 3.0, "acceptance": 0.5}
    assert "3.00 tok/step, acceptance 50%" in caplog.text and "generated 30 tok" in caplog.text


def test_plain_requests_log_speed_only(caplog):
    record = {}
    with caplog.at_level(logging.INFO, logger="ninfer.server"):
        _log_stats("r2", {"prompt_tokens": 5, "generated_tokens": 3, "decode_tok_s": 9.0}, record)
    assert record == {} and "tok/step" not in caplog.text and "generated 3 tok" in caplog.text
