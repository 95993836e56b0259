//! libvirt domain XML linter (catalogue §9).
