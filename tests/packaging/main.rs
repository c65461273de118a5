//! Full tier, what ships: the unit and sysconfig, the RPMs built and
//! installed, their names on each target, and the fuzz targets run
//! briefly. Needs root, rpmbuild, systemd-analyze and cargo-fuzz
//! (`.ci/run` installs them).

mod fuzz_smoke;
mod packaging;
mod rpm;
mod rpm_names;
