"""The telling line of a failed step's output."""

from __future__ import annotations

from puffer_core.matrix.logs import summarize_log


def test_summaries_pick_the_telling_line():
    resolver = (
        "Using Python 3.11.7 environment at: x\n  × No solution found when resolving dependencies:\n"
        "  ╰─▶ Because there is no version of six==99.0 and you require six==99.0, we can conclude that your "
        "requirements are unsatisfiable.\n[exit code 1]\n"
    )
    assert summarize_log(resolver).startswith("Because there is no version of six==99.0")
    build = (
        "Resolved 5 packages\n  × Failed to build `nle==0.9.1`\n  ├─▶ The build backend returned an error\n"
        "  ╰─▶ Call to `setuptools.build_meta.build_wheel` failed (exit status: 1)\n\n      [stderr]\n"
        "      CMake Error at CMakeLists.txt:3 (project): no CMAKE_C_COMPILER could be found.\n"
        "      hint: This usually indicates a problem with the package or the build environment.\n"
    )
    summary = summarize_log(build)
    assert summary.startswith("Failed to build `nle==0.9.1`") and "CMake Error" in summary
    trace = 'Traceback (most recent call last):\n  File "x", line 1\nValueError: bad shape\n'
    assert summarize_log(trace) == "ValueError: bad shape"
    assert len(summarize_log("x" * 1000)) <= 240
