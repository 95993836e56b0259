//! VMware .vmx linter (catalogue §10).
