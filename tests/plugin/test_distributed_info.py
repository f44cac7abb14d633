"""``distributedInfo`` as the plugin's torch recorder adds it from the launcher's environment (runs on
Python 3.8 too; the end-to-end proof, HTA loading a collected job, is tests/test_collect.py)."""

import unittest

from msmonitor_plugin.trace.torch_recorder import distributed_info


class DistributedInfoTest(unittest.TestCase):
    def test_torchrun_and_ascend_variables_give_rank_and_world_size(self):
        self.assertEqual(
            distributed_info({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"}),
            {"backend": "", "rank": 3, "world_size": 8},
        )
        self.assertEqual(
            distributed_info({"RANK_ID": "1", "RANK_SIZE": "2"}), {"backend": "", "rank": 1, "world_size": 2}
        )

    def test_a_world_size_alone_is_no_rank_and_an_unknown_size_is_left_out(self):
        self.assertIsNone(distributed_info({"WORLD_SIZE": "8"}))
        self.assertIsNone(distributed_info({"RANK": "x"}))
        self.assertEqual(distributed_info({"RANK": "0"}), {"backend": "", "rank": 0})


if __name__ == "__main__":
    unittest.main()
