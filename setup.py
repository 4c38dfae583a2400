"""Maps the design card's top-level folders under the ``knowspec`` namespace.

``impl/`` installs as ``knowspec.impl``, ``generated/`` as ``knowspec.generated`` and so on;
no bare ``impl`` or ``generated`` module ever lands in site-packages. Subpackages are found by
walking each folder, so a new subpackage cannot silently drop out of the wheel.
"""

from setuptools import find_packages, setup

FOLDERS = ("impl", "generated", "codegen", "conformance")

packages = []
for folder in FOLDERS:
    packages.append(f"knowspec.{folder}")
    packages.extend(f"knowspec.{folder}.{sub}" for sub in find_packages(folder))

setup(
    packages=packages,
    package_dir={f"knowspec.{folder}": folder for folder in FOLDERS},
    package_data={
        "knowspec.generated": ["*.json", "*.md", "schemas/*.json", "schemas/*/*.json", "docpool/*.sql"],
        "knowspec.codegen": ["templates/*.j2"],
        "knowspec.impl.docpool.sql": ["*.sql"],
    },
    include_package_data=False,
)
