"""Grader entry points: run a learner's submission against a course repository and leave the
grader's results file, whatever happens.

- :mod:`.gradescope` (``gradescope_zip/setup.sh``, ``gradescope_zip/run_autograder``) writes
  ``/autograder/results/results.json``;
- :mod:`.prairielearn` (``run_prairielearn.sh``) writes ``/grade/results/results.json``.

Both share :mod:`.common`: a scratch copy of the course with the learner's files laid over it
(only the files each kata's manifest lists as learner-edited: never tests), then one pytest run
with the grader's report format. Every path can be overridden (options or environment), which is
how the tests run them against a temporary demo course.
"""
