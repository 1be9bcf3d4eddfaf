"""The installed package as a whole: its version against the C++ programs', its stub and
py.typed, its programs, `xtel nixl install` finding the plug-in inside the package, and what the
module, the plug-in and the programs need from the dynamic loader."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

import xtel
from conftest import program
from xtel import _xtel


def project_version():
    """The project's VERSION in CMakeLists.txt, the one place it is written."""
    with open(os.path.join(os.environ['XTEL_SOURCE_DIR'], 'CMakeLists.txt')) as f:
        return re.search(r'project\(xtel VERSION ([0-9.]+)', f.read()).group(1)


def test_python_m_xtel_version_prints_what_the_cpp_xtel_prints():
    python = subprocess.run([sys.executable, '-m', 'xtel', '--version'], capture_output=True,
                            text=True, check=True).stdout
    cpp = subprocess.run([program('xtel'), '--version'], capture_output=True, text=True,
                         check=True).stdout
    assert python == cpp == f'xtel {project_version()}\n'
    assert xtel.__version__ == xtel.version() == project_version()


def test_python_m_xtel_refuses_other_arguments_with_status_64():
    r = subprocess.run([sys.executable, '-m', 'xtel', '--frobnicate'], capture_output=True,
                       text=True)
    assert r.returncode == 64 and r.stdout == ''
    assert r.stderr == 'python -m xtel: expected --version or --help, got --frobnicate\n'


def test_the_package_ships_its_stub_and_py_typed_naming_every_public_name():
    here = os.path.dirname(xtel.__file__)
    assert os.path.isfile(os.path.join(here, 'py.typed'))
    with open(os.path.join(here, '_xtel.pyi')) as f:
        stub = f.read()
    for name in xtel.__all__:
        if name not in ('__version__', 'nixl_plugin_path'):
            assert re.search(rf'^(class|def) {name}\b', stub, re.M), name
    assert 'def record_transfer(self, op: str, peer: str, bytes: int, *, status: str' in stub


def test_every_public_name_has_a_docstring():
    for name in xtel.__all__:
        if name != '__version__':
            assert getattr(xtel, name).__doc__, name
    for method in ('record_transfer', 'record_notified', 'event', 'flush', 'close', 'stats'):
        assert getattr(xtel.Telemetry, method).__doc__, method


def test_the_exceptions_are_the_packages_and_derive_from_the_builtin_ones():
    assert xtel.ConfigError.__module__ == 'xtel'
    assert issubclass(xtel.ConfigError, ValueError) and issubclass(xtel.ConfigError, xtel.Error)
    assert issubclass(xtel.FormatError, ValueError)
    assert issubclass(xtel.ExporterError, OSError)


def test_xtel_nixl_install_links_the_plugin_the_package_carries(tmp_path):
    plugin = xtel.nixl_plugin_path()
    assert os.path.isfile(plugin)
    r = subprocess.run([program('xtel'), 'nixl', 'install', '--plugin-dir', str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    link = tmp_path / 'libtelemetry_exporter_xtel.so'
    assert os.readlink(link) == plugin
    assert r.stdout == f'xtel nixl install: linked {link} to {plugin}\n'
    again = subprocess.run([program('xtel'), 'nixl', 'install', '--plugin-dir', str(tmp_path)],
                           capture_output=True, text=True)
    assert again.returncode == 0
    assert again.stdout == f'xtel nixl install: {link} already links to {plugin}\n'


def test_xtel_nixl_install_says_the_plugin_default_is_the_packages():
    r = subprocess.run([program('xtel'), 'nixl', 'install', '--help'], capture_output=True,
                       text=True, check=True)
    assert 'the plug-in to link (default: the one in the xtel package PYTHON imports)' in r.stdout


def link_test():
    """tests/link_test.py of the source tree: its reader of NEEDED entries (readelf -d) and its
    pattern of UCX's libraries, the ones the ctest link checks use."""
    path = os.path.join(os.environ['XTEL_SOURCE_DIR'], 'tests', 'link_test.py')
    spec = importlib.util.spec_from_file_location('link_test', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_installed_module_plugin_and_programs_need_no_ucx_library():
    # Inside an engine the module is loaded beside the UCX NIXL bundles: a UCX of its own (it
    # makes pipelines and no agent) would be a second copy of UCX's libraries in the process.
    readelf = shutil.which('readelf')
    if readelf is None:
        pytest.skip('readelf (binutils) is not installed: the NEEDED entries cannot be read')
    check = link_test()
    binaries = {'xtel._xtel': _xtel.__file__, 'the NIXL plug-in': xtel.nixl_plugin_path(),
                'xtel-exporter': program('xtel-exporter'), 'xtel': program('xtel')}
    for name, path in binaries.items():
        libs = check.needed(readelf, path)
        assert 'libc.so.6' in libs, f'{name} ({path}): NEEDED read as {libs}'
        assert [lib for lib in libs if check.UCX.search(lib)] == [], f'{name} ({path}): {libs}'
