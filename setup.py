"""Maps the design card's top-level folders under the ``knowspec`` namespace.

``impl/`` installs as ``knowspec.impl``, ``generated/`` as ``knowspec.generated`` and so on;
no bare ``impl`` or ``generated`` module ever lands in site-packages. Subpackages are found by
walking each folder, so a new subpackage cannot silently drop out of the wheel.

``examples/`` and ``spec/`` ship as data beside them (``knowspec/examples``, ``knowspec/spec``),
so the installed tree keeps the repository's layout: ``knowspec demo`` finds the sample bundle and
help corpus, and ``knowspec codegen --check`` the contracts, the same way in a wheel and a checkout.
"""

from setuptools import find_packages, setup

FOLDERS = ("impl", "generated", "codegen", "conformance")
DATA_FOLDERS = ("examples", "spec")  # no Python inside: every file ships as it is

packages = []
for folder in FOLDERS:
    packages.append(f"knowspec.{folder}")
    packages.extend(f"knowspec.{folder}.{sub}" for sub in find_packages(folder))
packages.extend(f"knowspec.{folder}" for folder in DATA_FOLDERS)

setup(
    packages=packages,
    package_dir={f"knowspec.{folder}": folder for folder in FOLDERS + DATA_FOLDERS},
    package_data={
        "knowspec.generated": ["*.json", "*.md", "schemas/*.json", "schemas/*/*.json", "docpool/*.sql"],
        "knowspec.codegen": ["templates/*.j2"],
        "knowspec.impl.docpool.sql": ["*.sql"],
        **{f"knowspec.{folder}": ["**/*"] for folder in DATA_FOLDERS},
    },
    include_package_data=False,
)
