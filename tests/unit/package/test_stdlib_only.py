"""Package-level checks: importing kproto stays standard-library only."""

import subprocess
import sys


def test_import_loads_no_third_party_module():
    code = (
        "import sys, sysconfig\n"
        "before = set(sys.modules)\n"
        "import kproto, kproto.errors\n"
        "stdlib = sys.stdlib_module_names\n"
        "new = [m for m in set(sys.modules) - before if m.split('.')[0] not in stdlib"
        " and m.split('.')[0] != 'kproto']\n"
        "print(sorted(new))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_unknown_error_code_maps_to_a_class():
    from kproto import errors

    cls = errors.for_code(31337)
    assert issubclass(cls, errors.BrokerResponseError)
    assert cls.errno == 31337
    assert errors.for_code(31337) is cls
