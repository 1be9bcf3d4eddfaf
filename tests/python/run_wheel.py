#!/usr/bin/env python3
"""The Python package's tests as a user meets the package: the wheel built from the source tree
(as `pip wheel .` builds it), installed into a fresh virtual environment, and pytest run there
on tests/python/ against that installed package, never the source tree.

Arguments: --source-dir, --build-dir (where the wheel, the tools' venv and the fresh venv go),
--telemetry-reader (the C++ telemetry_reader the reader tests compare with) and, optionally,
--push-exporter (an xtel-exporter built with XTEL_PUSH=ON, whose OTLP spans a test decodes:
the wheel's is built without; the test is skipped without it). The build's
tools (scikit-build-core, nanobind, pytest) come from scripts/deps's
xtel_install_python_test_deps, once. Extra CMake arguments for the wheel's build can be given
in CMAKE_ARGS (scikit-build-core reads it), e.g. a compiler launcher. Exits with pytest's
status; 77 (skipped) when pip cannot reach the package index for the tools.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import time

SKIP = 77


def run(argv, **kw):
    """argv run, its output shown; the exit status."""
    print('+', ' '.join(argv), flush=True)
    return subprocess.run(argv, **kw).returncode


def tools(source_dir, venv):
    """The tools' Python, after scripts/deps installed what was missing (None: no index)."""
    deps = os.path.join(source_dir, 'scripts', 'deps')
    r = subprocess.run(['bash', '-c', 'source "$1" && xtel_install_python_test_deps "$2"', 'deps',
                        deps, venv], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        return None
    return os.path.join(venv, 'bin', 'python3')


def build_wheel(python, source_dir, dist):
    """The wheel's path, built from source_dir into dist (emptied first)."""
    shutil.rmtree(dist, ignore_errors=True)
    started = time.monotonic()
    env = dict(os.environ)
    env.setdefault('CMAKE_BUILD_PARALLEL_LEVEL', str(os.cpu_count() or 2))
    # CMake's build folder kept in the build's own: a rerun builds what changed only.
    rc = run([python, '-m', 'pip', 'wheel', '--quiet', '--disable-pip-version-check',
              '--no-build-isolation', '--no-deps', '-w', dist,
              '-C', f'build-dir={os.path.join(os.path.dirname(dist), "wheel-build")}',
              source_dir], env=env)
    if rc != 0:
        sys.exit(rc)
    wheels = glob.glob(os.path.join(dist, 'xtel-*.whl'))
    print(f'built {os.path.basename(wheels[0])} in {time.monotonic() - started:.0f} s', flush=True)
    return wheels[0]


def main():
    p = argparse.ArgumentParser()
    for a in ('--source-dir', '--build-dir', '--telemetry-reader'):
        p.add_argument(a, required=True)
    p.add_argument('--push-exporter', default='')
    args = p.parse_args()
    base = os.path.join(args.build_dir, 'python-test')
    python = tools(args.source_dir, os.path.join(base, 'tools'))
    if python is None:
        print('SKIP: the Python package\'s build tools could not be installed (above)')
        return SKIP
    wheel = build_wheel(python, args.source_dir, os.path.join(base, 'dist'))
    fresh = os.path.join(base, 'venv')
    shutil.rmtree(fresh, ignore_errors=True)
    wheelhouse = os.path.join(base, 'tools', 'wheelhouse')
    if (run([sys.executable, '-m', 'venv', fresh]) != 0 or
            run([os.path.join(fresh, 'bin', 'python3'), '-m', 'pip', 'install', '--quiet',
                 '--disable-pip-version-check', '--no-index', '--find-links', wheelhouse, wheel,
                 'pytest', 'mypy', 'opentelemetry-proto', 'opentelemetry-sdk']) != 0):
        return 1
    # NIXL's pinned wheel beside the package, for xtel.instrument.nixl's tests
    # (test_instrument_nixl.py): installed as the NIXL tests install it (scripts/deps).
    deps = os.path.join(args.source_dir, 'scripts', 'deps')
    if run(['bash', '-c', 'source "$1" && xtel_install_nixl_test_deps "$2"', 'deps', deps,
            fresh]) != 0:
        return 1
    env = dict(os.environ, XTEL_SOURCE_DIR=args.source_dir,
               XTEL_TELEMETRY_READER=args.telemetry_reader)
    if args.push_exporter:
        env['XTEL_EXPORTER_PUSH'] = args.push_exporter
    # From a folder of its own: the source tree's python/ must not shadow the installed package.
    return run([os.path.join(fresh, 'bin', 'python3'), '-m', 'pytest', '-q', '-p',
                'no:cacheprovider', os.path.join(args.source_dir, 'tests', 'python')],
               cwd=base, env=env)


if __name__ == '__main__':
    sys.exit(main())
