# Shared by scripts/demo and scripts/test. Source it; it defines functions only.
# shellcheck shell=bash

# Debian 12 packages, by purpose.
AL_BUILD_PACKAGES=(gcc meson ninja-build pkg-config libseccomp-dev libjansson-dev libcmocka-dev
	libssl-dev libc-ares-dev libnftnl-dev libmnl-dev zlib1g-dev libbrotli-dev libmicrohttpd-dev)
# scripts/test's Debian package stage: dpkg-buildpackage, lintian, man -w.
AL_DEB_PACKAGES=(debhelper dpkg-dev lintian man-db)
AL_DEMO_PACKAGES=(python3 python3-pandas)
# qemu-system-x86 and Debian's two kernels: the microvm and vm backends.
# podman, containerd, runc and busybox-static: the OCI suites (oci-podman,
# oci-containerd, oci-cri in tests/e2e/meson.build), whose test images are a
# busybox root and the host's own python3; python3-grpcio: oci-cri's client
# of the Kubernetes CRI (gRPC) that containerd's CRI plugin serves.
AL_TEST_PACKAGES=(podman containerd runc busybox-static qemu-system-x86 linux-image-cloud-amd64 linux-image-amd64 cpio e2fsprogs python3 python3-pandas python3-numpy curl git make nodejs iproute2 nftables clang libclang-rt-14-dev bubblewrap wasi-libc libclang-rt-14-dev-wasm32 runsc
	hyperfine util-linux clang-format python3-jwt python3-cryptography python3-botocore python3-yaml python3-pytest node-typescript
	python3-grpcio)

al_say() {
	printf '==> %s\n' "$*"
}

al_die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# al_ensure_packages PKG...: install the packages that dpkg does not list as installed.
# Does nothing (and needs neither root nor network) when all are present.
al_ensure_packages() {
	local missing=() pkg sudo=()
	for pkg in "$@"; do
		if [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" != "install ok installed" ]; then
			case " ${missing[*]} " in
			*" $pkg "*) ;;
			*) missing+=("$pkg") ;;
			esac
		fi
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null 2>&1 ||
			al_die "missing packages (${missing[*]}) and not root: run as root or install them"
		sudo=(sudo)
	fi
	al_say "installing missing packages: ${missing[*]}"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
		al_die "apt-get update failed"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends "${missing[@]}" </dev/null ||
		al_die "apt-get install failed: ${missing[*]}"
}

# al_configure DIR [MESON_OPTION...]: configure DIR, or reconfigure it with the
# given options when it is already configured.
al_configure() {
	local dir=$1
	shift
	if [ -f "$dir/meson-private/coredata.dat" ]; then
		if [ $# -eq 0 ] && [ -f "$dir/build.ninja" ]; then
			return 0
		fi
		meson setup --reconfigure "$dir" "$@"
	else
		meson setup "$dir" "$@"
	fi
}

# al_build DIR [MESON_OPTION...]: configure (see al_configure) and build DIR.
al_build() {
	local dir=$1
	al_configure "$@" && ninja -C "$dir"
}
