"""Run the worker tests with unittest and print each test's wall time at the end.

    python tests/run.py [unittest names...]     (default: every tests/test_*.py)
"""

import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class TimedResult(unittest.TextTestResult):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.times = []

    def startTest(self, test):
        self._t0 = time.time()
        super().startTest(test)

    def stopTest(self, test):
        self.times.append((test.id(), time.time() - self._t0))
        super().stopTest(test)


def main(argv):
    sys.path.insert(0, ROOT)
    sys.path.insert(0, HERE)
    # tests that tune in this process measure with the thread pool the worker has
    from tgc_worker.tvmutil import default_runtime_threads

    default_runtime_threads()
    loader = unittest.TestLoader()
    if argv:
        suite = loader.loadTestsFromNames(argv)
    else:
        suite = loader.discover(HERE, pattern="test_*.py", top_level_dir=ROOT)
    t0 = time.time()
    runner = unittest.TextTestRunner(verbosity=2, resultclass=TimedResult)
    result = runner.run(suite)
    print("\nwall time per test:")
    for name, secs in result.times:
        print(f"  {secs:7.1f} s  {name}")
    print(f"  {time.time() - t0:7.1f} s  total")
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
