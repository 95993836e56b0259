//! The host side of a QEMU/KVM guest on a Linux host: its vCPU threads found by QEMU pid or libvirt domain
//! ([`discover`]), and followed through the host's tracefs trace ([`fold`]).

pub mod discover;
pub mod fold;
