#!/usr/bin/env bash
# Builds the source RPM and the binary RPM from this checkout, offline:
#  1. a source tarball of the checkout as it is (tracked files, and new ones
#     git does not ignore);
#  2. a tarball of every crate the build needs (cargo vendor: the only step
#     that reads the crate registry, or its local cache);
#  3. rpmbuild -bs: the source RPM, which carries both and the spec;
#  4. rpmbuild --rebuild of that source RPM, exactly what a site runs on
#     its EL8, EL9 or Fedora host (or mock does): the binary RPM comes from
#     the SRPM alone, built with cargo --offline --frozen, and %check runs
#     (the built binary's --version and a config check).
# Output: $RPM_TOPDIR (default target/rpm)/{RPMS,SRPMS}.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

name=xrd2ganglia
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
spec_version=$(sed -n 's/^Version: *//p' packaging/$name.spec)
if [ "$version" != "$spec_version" ]; then
    echo "build-rpm: Cargo.toml says $version, packaging/$name.spec says $spec_version" >&2
    exit 1
fi

topdir=${RPM_TOPDIR:-$top/target/rpm}
rm -rf "$topdir"
mkdir -p "$topdir"/{SOURCES,SPECS,BUILD,BUILDROOT,RPMS,SRPMS}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

echo "build-rpm: source tarball $name-$version.tar.gz"
mkdir "$stage/$name-$version"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$stage/$name-$version"
tar -czf "$topdir/SOURCES/$name-$version.tar.gz" -C "$stage" "$name-$version"

echo "build-rpm: vendored crates $name-$version-vendor.tar.gz"
(cd "$stage/$name-$version" && cargo vendor --locked vendor >/dev/null)
tar -czf "$topdir/SOURCES/$name-$version-vendor.tar.gz" -C "$stage/$name-$version" vendor

cp packaging/$name.sysusers "$topdir/SOURCES/"
cp packaging/$name.spec "$topdir/SPECS/"

# On a machine whose rpm database does not know the build tools (Debian's
# rpm), BuildRequires cannot be checked: they come from the system instead.
nodeps=()
if ! rpm -q --whatprovides cargo >/dev/null 2>&1; then
    nodeps=(--nodeps)
fi
echo "build-rpm: rpmbuild -bs ${nodeps[*]}"
rpmbuild -bs "${nodeps[@]}" --define "_topdir $topdir" "$topdir/SPECS/$name.spec"
srpm=$(find "$topdir/SRPMS" -name "$name-$version-*.src.rpm" -print -quit)
echo "build-rpm: rpmbuild --rebuild ${nodeps[*]} ${srpm##*/}"
rpmbuild --rebuild "${nodeps[@]}" --define "_topdir $topdir" "$srpm"
find "$topdir/RPMS" "$topdir/SRPMS" -name '*.rpm' -print
