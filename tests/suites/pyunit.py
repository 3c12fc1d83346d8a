"""Run Python test modules and print one line per test case: ID<TAB>STATUS<TAB>DESCRIPTION.

STATUS is pass, fail (a failure or an error), skip, xfail (expected failure) or xpass. The
tests' own output goes to stderr so that stdout carries only the results.
"""
import sys
import unittest


class Result(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.lines = []

    def _add(self, test, status, why=""):
        self.lines.append("%s\t%s\t%s" % (test.id(), status, why.replace("\t", " ").replace("\n", " ")))

    def addSuccess(self, test):
        self._add(test, "pass")

    def addFailure(self, test, err):
        self._add(test, "fail", str(err[1])[:200])

    def addError(self, test, err):
        # setUpClass/module errors arrive as a _ErrorHolder: report them under their own id
        self._add(test, "fail", str(err[1])[:200])

    def addSkip(self, test, reason):
        self._add(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        self._add(test, "xfail")

    def addUnexpectedSuccess(self, test):
        self._add(test, "xpass")

    def addSubTest(self, test, subtest, err):
        if err is not None:
            self._add(subtest, "fail", str(err[1])[:200])


def main():
    out = sys.stdout
    sys.stdout = sys.stderr
    suite = unittest.defaultTestLoader.loadTestsFromNames(sys.argv[1:])
    result = Result()
    suite.run(result)
    out.write("".join(line + "\n" for line in result.lines))


if __name__ == "__main__":
    main()
