"""`init --base`'s rule for a first run (minitrain/commands/init_base.py `first_run`): batch size, row length and
gradient checkpointing from the base's parameter count and the machine's memory, one test per branch."""

from __future__ import annotations

from minitrain.commands.init_base import first_run, machine_memory

GIB = 1 << 30
SMOLLM2 = 134_515_008  # SmolLM2-135M's parameters


def test_a_course_sized_base_keeps_four_rows_from_256_without_checkpointing():
    assert first_run(10_000_000, 16 * GIB, 67, 8192, True) == {"batch_size": 4, "row": 256,
                                                               "gradient_checkpointing": False}


def test_a_large_base_on_a_laptop_trains_256_tokens_a_micro_batch_with_checkpointing():
    assert first_run(SMOLLM2, 16 * GIB, 50, 8192, True) == {"batch_size": 4, "row": 64, "gradient_checkpointing": True}
    # a longer record: a longer row, fewer of them; never more than the 256 tokens
    assert first_run(SMOLLM2, 16 * GIB, 200, 8192, True) == {"batch_size": 1, "row": 256,
                                                             "gradient_checkpointing": True}
    assert first_run(SMOLLM2, 16 * GIB, 5000, 8192, True)["row"] == 256


def test_a_machine_under_8_gib_or_a_billion_parameter_base_halves_the_micro_batch():
    assert first_run(SMOLLM2, 4 * GIB, 50, 8192, True) == {"batch_size": 2, "row": 64, "gradient_checkpointing": True}
    assert first_run(1_100_000_000, 64 * GIB, 50, 8192, True)["batch_size"] == 2


def test_a_family_that_cannot_recompute_its_layers_does_not_checkpoint():
    assert first_run(SMOLLM2, 16 * GIB, 50, 1024, False) == {"batch_size": 4, "row": 64,
                                                             "gradient_checkpointing": False}


def test_the_machine_memory_is_read_from_the_system():
    assert machine_memory() > 256 << 20
