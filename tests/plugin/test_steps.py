"""Step counting and process identity (runs on Python 3.8 too)."""

import gc
import os
import unittest

from msmonitor_plugin import identity
from msmonitor_plugin.steps import StepCounter


class Optimizer:
    pass


class StepCounterTest(unittest.TestCase):
    def test_explicit_steps_count_and_run_pending_work_at_the_boundary(self):
        counter = StepCounter()
        seen = []
        counter.step()
        counter.pending = seen.append
        counter.step()
        counter.step()
        self.assertEqual(counter.count, 3)
        self.assertEqual(seen, [2, 3])

    def test_counts_one_optimizer_until_it_is_gone(self):
        counter = StepCounter()
        first, second = Optimizer(), Optimizer()
        for _ in range(3):
            counter.optimizer_stepped(first)
            counter.optimizer_stepped(second)  # a second optimizer in the same step: not a new step
        self.assertEqual(counter.count, 3)
        del first
        gc.collect()
        counter.optimizer_stepped(second)
        self.assertEqual(counter.count, 4)

    def test_explicit_step_calls_switch_optimizer_counting_off(self):
        counter = StepCounter()
        optimizer = Optimizer()
        counter.step()
        counter.optimizer_stepped(optimizer)
        self.assertEqual(counter.count, 1)

    def test_once_runs_at_the_next_boundary_only_and_never_takes_a_traces_slot(self):
        counter = StepCounter()
        seen = []
        cancel = counter.once(lambda: seen.append(counter.count))
        self.assertIsNotNone(cancel)
        counter.step()
        counter.step()
        self.assertEqual(seen, [1])
        self.assertIsNone(counter.pending)
        cancel = counter.once(lambda: seen.append("cancelled"))
        cancel()
        counter.step()
        self.assertEqual(seen, [1])
        counter.pending = seen.append  # a trace's work
        self.assertIsNone(counter.once(lambda: seen.append("never")))
        counter.step()
        self.assertEqual(seen, [1, 4])

    def test_an_action_that_fails_at_a_boundary_never_reaches_the_training_loop(self):
        counter = StepCounter()

        def broken():
            raise RuntimeError("no profiler here")

        counter.once(broken)
        with self.assertLogs("msmonitor_plugin", "ERROR"):
            counter.step()
        self.assertEqual(counter.count, 1)
        self.assertIsNone(counter.pending)


class IdentityTest(unittest.TestCase):
    def test_registration_describes_this_process(self):
        env = {
            "RANK": "3",
            "LOCAL_RANK": "1",
            "WORLD_SIZE": "8",
            "SLURM_JOB_ID": "4242",
            "ASCEND_RT_VISIBLE_DEVICES": "4,5",
        }
        hello = identity.hello(step=9, capabilities=["push"], env=env)
        self.assertEqual(hello.pid, os.getpid())
        self.assertEqual(hello.ancestors[0], os.getppid())
        self.assertNotIn(1, hello.ancestors)
        self.assertEqual((hello.rank, hello.local_rank, hello.world_size, hello.job_id), (3, 1, 8, 4242))
        self.assertEqual(hello.devices, [5])
        self.assertEqual(hello.step, 9)

    def test_job_id_prefers_msmonitor_then_slurm(self):
        self.assertEqual(identity.job_id({"MSMONITOR_JOB_ID": "7", "SLURM_JOB_ID": "9"}), 7)
        self.assertEqual(identity.job_id({"SLURM_JOB_ID": "9"}), 9)
        self.assertEqual(identity.job_id({"SLURM_JOB_ID": "not-a-number"}), 0)

    def test_mindspore_rank_variables(self):
        hello = identity.hello(step=0, capabilities=[], env={"RANK_ID": "2", "RANK_SIZE": "4"})
        self.assertEqual((hello.rank, hello.world_size), (2, 4))

    def test_all_visible_devices_without_a_local_rank(self):
        self.assertEqual(identity.devices({"CUDA_VISIBLE_DEVICES": "0,1"}), [0, 1])
        self.assertEqual(identity.devices({}), [])

    def test_digits_int_refuses_or_misreads_are_ignored_like_any_other_garbage(self):
        """'²' passed isdigit() and made int() raise inside registration; '٣' read as 3."""
        env = {
            "RANK": "²",
            "RANK_ID": "1",
            "LOCAL_RANK": "٣",
            "WORLD_SIZE": "--8",
            "MSMONITOR_JOB_ID": "1_000",
            "SLURM_JOB_ID": "5",
            "ASCEND_RT_VISIBLE_DEVICES": "0,²,1",
        }
        hello = identity.hello(step=0, capabilities=[], env=env)
        self.assertEqual((hello.rank, hello.local_rank, hello.world_size, hello.job_id), (1, -1, -1, 5))
        self.assertEqual(hello.devices, [0, 1])

    def test_a_negative_or_padded_rank_reads_as_before(self):
        self.assertEqual(identity.rank({"RANK": "-1"}), -1)
        self.assertEqual(identity.rank({"RANK": " 3 "}), 3)


if __name__ == "__main__":
    unittest.main()
