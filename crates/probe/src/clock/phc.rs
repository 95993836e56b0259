//! A PTP hardware clock against the system clock, read directly: `PTP_SYS_OFFSET_EXTENDED` has the driver
//! read the system clock just before and just after each PHC read, so each sample carries its own bound
//! (half that window). What phc2sys steers is the difference; what it achieved is read here, not from
//! phc2sys's log.
//!
//! A PHC disciplined by ptp4l runs on TAI; the system clock on UTC. When the raw difference is within half
//! a second of TAI − UTC (the kernel's, else 37 s), the PHC is taken to be on TAI and that offset is taken
//! off (the state then says "readable (TAI)").

use super::track::Reading;
use std::os::fd::AsRawFd;

/// TAI − UTC since 1 January 2017.
const TAI_MINUS_UTC_S: i32 = 37;

/// Samples per read (the kernel's limit is 25); the one with the narrowest window is kept.
const SAMPLES: u32 = 9;
const MAX_SAMPLES: usize = 25;

/// `struct ptp_clock_time`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PtpClockTime {
    sec: i64,
    nsec: u32,
    reserved: u32,
}

/// `struct ptp_sys_offset_extended`: for each sample, system time before, PHC time, system time after.
#[repr(C)]
struct SysOffsetExtended {
    n_samples: u32,
    clockid: i32,
    rsv: [u32; 2],
    ts: [[PtpClockTime; 3]; MAX_SAMPLES],
}

/// `struct ptp_sys_offset`: system time, PHC time, system time, …, system time.
#[repr(C)]
struct SysOffset {
    n_samples: u32,
    rsv: [u32; 3],
    ts: [PtpClockTime; 2 * MAX_SAMPLES + 1],
}

/// `_IOW('=', 5, struct ptp_sys_offset)`: every driver has it (the kernel reads the system clock around
/// each PHC read), ptp_kvm among those without the extended request.
const PTP_SYS_OFFSET: libc::c_ulong = (1 << 30)
    | ((std::mem::size_of::<SysOffset>() as libc::c_ulong) << 16)
    | ((b'=' as libc::c_ulong) << 8)
    | 5;

/// `_IOWR('=', 9, struct ptp_sys_offset_extended)`.
const PTP_SYS_OFFSET_EXTENDED: libc::c_ulong = (3 << 30)
    | ((std::mem::size_of::<SysOffsetExtended>() as libc::c_ulong) << 16)
    | ((b'=' as libc::c_ulong) << 8)
    | 9;

fn ns(t: PtpClockTime) -> i128 {
    t.sec as i128 * 1_000_000_000 + t.nsec as i128
}

/// Of (system before, PHC, system after) reads, the PHC − system offset of the narrowest and its bound.
fn narrowest(
    reads: impl Iterator<Item = (PtpClockTime, PtpClockTime, PtpClockTime)>,
) -> std::io::Result<(i128, u64)> {
    reads
        .map(|(before, phc, after)| {
            let (b, a) = (ns(before), ns(after));
            (ns(phc) - (b + a) / 2, ((a - b).max(0) as u64).div_ceil(2))
        })
        .min_by_key(|s| s.1)
        .ok_or_else(|| std::io::Error::other("no sample"))
}

/// An open PHC.
pub struct Phc {
    file: std::fs::File,
}

impl Phc {
    /// Open `path` (`/dev/ptp0`) read-only: reading needs no more.
    pub fn open(path: &str) -> std::io::Result<Phc> {
        Ok(Phc {
            file: std::fs::File::open(path)?,
        })
    }

    /// PHC − CLOCK_REALTIME, ns, and its bound: the narrowest of [`SAMPLES`] reads; by the plain request
    /// where the driver has no extended one.
    pub fn offset(&self) -> std::io::Result<(i128, u64)> {
        match self.offset_extended() {
            // EOPNOTSUPP: a driver without it (ptp_kvm); ENOTTY: a kernel before 5.0.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOTTY)) => {
                self.offset_plain()
            }
            r => r,
        }
    }

    fn offset_plain(&self) -> std::io::Result<(i128, u64)> {
        let mut req = SysOffset {
            n_samples: SAMPLES,
            rsv: [0; 3],
            ts: [PtpClockTime::default(); 2 * MAX_SAMPLES + 1],
        };
        // SAFETY: `req` is the structure this ioctl reads and fills, and lives through the call.
        let rc = unsafe { libc::ioctl(self.file.as_raw_fd(), PTP_SYS_OFFSET as _, &mut req) };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        narrowest(
            req.ts[..2 * SAMPLES as usize + 1]
                .windows(3)
                .step_by(2)
                .map(|w| (w[0], w[1], w[2])),
        )
    }

    fn offset_extended(&self) -> std::io::Result<(i128, u64)> {
        let mut req = SysOffsetExtended {
            n_samples: SAMPLES,
            clockid: libc::CLOCK_REALTIME,
            rsv: [0; 2],
            ts: [[PtpClockTime::default(); 3]; MAX_SAMPLES],
        };
        // SAFETY: `req` is the structure this ioctl reads and fills, and lives through the call.
        let rc = unsafe {
            libc::ioctl(
                self.file.as_raw_fd(),
                PTP_SYS_OFFSET_EXTENDED as _,
                &mut req,
            )
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        narrowest(
            req.ts[..SAMPLES as usize]
                .iter()
                .map(|[b, p, a]| (*b, *p, *a)),
        )
    }

    /// One poll: the offset (TAI − UTC taken off when the PHC runs on TAI) and the read's bound as its
    /// delay. TAI − UTC is the kernel's (`tai_s`, set by whoever keeps the leap seconds), else 37 s (the
    /// value since 2017; no leap second is planned).
    pub fn read(&self, tai_s: i32) -> std::io::Result<Reading> {
        let (raw, bound) = self.offset()?;
        let tai = if tai_s != 0 { tai_s } else { TAI_MINUS_UTC_S } as i128 * 1_000_000_000;
        let on_tai = (raw - tai).abs() < 500_000_000;
        let offset = if on_tai { raw - tai } else { raw };
        Ok(Reading {
            state: if on_tai { "readable (TAI)" } else { "readable" }.into(),
            has_reference: true,
            offset_ns: Some(offset.clamp(i64::MIN as i128, i64::MAX as i128) as i64),
            delay_ns: Some(bound as i64),
            ..Reading::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_has_the_kernels_layout() {
        // 4 × u32, then 25 × 3 × 16 bytes: 1,216 bytes, so the ioctl number is 0xc4c03d09.
        assert_eq!(std::mem::size_of::<SysOffsetExtended>(), 1216);
        assert_eq!(PTP_SYS_OFFSET_EXTENDED, 0xc4c0_3d09);
        // 4 × u32, then 51 × 16 bytes: 832 bytes, written by the caller: 0x43403d05.
        assert_eq!(std::mem::size_of::<SysOffset>(), 832);
        assert_eq!(PTP_SYS_OFFSET, 0x4340_3d05);
    }

    #[test]
    fn the_narrowest_read_gives_the_offset_and_half_its_window() {
        let t = |ns: i64| PtpClockTime {
            sec: ns / 1_000_000_000,
            nsec: (ns % 1_000_000_000) as u32,
            reserved: 0,
        };
        let reads = [
            (t(1_000), t(37_000_002_000), t(1_600)),
            (t(5_000), t(37_000_005_150), t(5_200)),
        ];
        // The second: window 200 ns, PHC − midpoint 37 s + 50 ns.
        assert_eq!(narrowest(reads.into_iter()).unwrap(), (37_000_000_050, 100));
    }

    #[test]
    fn a_missing_device_is_an_error_not_a_reading() {
        assert!(Phc::open("/dev/ptp-none-here").is_err());
    }
}
