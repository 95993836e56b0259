//! The probe kinds, listed once ([`with_kinds!`]): each kind's result type, name and what it measures. The
//! list makes the run document's [`ProbeResult`] (one variant per kind), [`ProbeKind`] and each result
//! type's [`Kind`] (the downcast a kind's own verb uses to get its typed result back); the layers above
//! hand it a macro of theirs to make their one dispatch (`rtgauge_analysis::kind::KindData`,
//! `rtgauge_report::kind::KindView`), so that no other source lists the kinds. Beside it, the facts every
//! kind shares: how a timed probe ended ([`StopReason`]), what a document knows of its results
//! ([`RunFacts`]).

use serde::{Deserialize, Serialize};

/// The one list of probe kinds, handed to the caller's macro `$m`: per kind `Variant => ResultType, "name",
/// "what it measures";`, in the order the views show them. The name is the run document's `"probe"` tag,
/// a profile's `kind`, a measure key's prefix and the verb's. Adding a kind is one line here (and its own
/// modules in each layer).
#[macro_export]
macro_rules! with_kinds {
    ($m:ident) => {
        $m! {
            Cyclic => $crate::cyclic::CyclicResult, "cyclic",
                "Timer wake-up latency (`rtgauge cyclic`, or imported cyclictest).";
            Oslat => $crate::oslat::OslatResult, "oslat",
                "Busy-loop OS noise (`rtgauge oslat`, or imported oslat).";
            Hwnoise => $crate::hwnoise::HwnoiseResult, "hwnoise",
                "Hardware and firmware noise (`rtgauge hwnoise`).";
            Net => $crate::net::NetResult, "net",
                "Network-function capacity (`rtgauge net cps|throughput`).";
            NetLatency => $crate::net_latency::NetLatencyResult, "net_latency",
                "Packet latency through the platform (`rtgauge net latency`).";
            Ops => $crate::ops::OpsResult, "ops",
                "OS-primitive latencies (`rtgauge ops`).";
            Mem => $crate::mem::MemResult, "mem",
                "Memory latency curve, bandwidth and NUMA matrix (`rtgauge mem`).";
            Numa => $crate::numa::NumaResult, "numa",
                "NUMA memory locality (`rtgauge numa`).";
            Clock => $crate::clock::ClockResult, "clock",
                "How well the clock is kept (`rtgauge clock`).";
        }
    };
}

/// A result type of one kind: the downcast its own verb uses to get the typed result back from a
/// [`ProbeResult`]. Implemented for each kind by the list ([`with_kinds!`]), nowhere else.
pub trait Kind: Sized + Into<ProbeResult> {
    /// Its kind.
    const KIND: ProbeKind;
    /// The result, if `p` is of this kind.
    fn from_ref(p: &ProbeResult) -> Option<&Self>;
    /// The result, if `p` is of this kind.
    fn from_mut(p: &mut ProbeResult) -> Option<&mut Self>;
    /// The result, if `p` is of this kind.
    fn from_owned(p: ProbeResult) -> Option<Self>;
}

/// The kinds' types from the list: [`ProbeResult`], [`ProbeKind`] and each result's [`Kind`].
macro_rules! define_kinds {
    ($($variant:ident => $ty:ty, $name:literal, $doc:literal;)*) => {
        /// One probe's result, tagged by probe kind. Reached through its kind's
        /// `rtgauge_analysis::kind::KindData`; a kind's own verb takes its typed result back with
        /// [`ProbeResult::downcast`].
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "probe")]
        pub enum ProbeResult {
            $(#[doc = $doc] #[serde(rename = $name)] $variant($ty),)*
        }

        /// The kinds of probe. The serialised name ([`ProbeKind::as_str`]) is the run document's
        /// `"probe"` tag, a profile's `kind`, a measure key's prefix and the verb.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum ProbeKind {
            $(#[doc = $doc] #[serde(rename = $name)] $variant,)*
        }

        impl ProbeKind {
            /// Every kind, in the order the views show them.
            pub const ALL: [ProbeKind; [$($name),*].len()] = [$(ProbeKind::$variant),*];

            /// The kind's name, as the verbs, the store's probe list and measure keys spell it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ProbeKind::$variant => $name,)*
                }
            }
        }

        impl ProbeResult {
            /// Which kind of probe it is.
            pub fn kind(&self) -> ProbeKind {
                match self {
                    $(ProbeResult::$variant(_) => ProbeKind::$variant,)*
                }
            }
        }

        $(
            impl From<$ty> for ProbeResult {
                fn from(r: $ty) -> ProbeResult {
                    ProbeResult::$variant(r)
                }
            }

            impl Kind for $ty {
                const KIND: ProbeKind = ProbeKind::$variant;

                fn from_ref(p: &ProbeResult) -> Option<&Self> {
                    match p {
                        ProbeResult::$variant(r) => Some(r),
                        _ => None,
                    }
                }

                fn from_mut(p: &mut ProbeResult) -> Option<&mut Self> {
                    match p {
                        ProbeResult::$variant(r) => Some(r),
                        _ => None,
                    }
                }

                fn from_owned(p: ProbeResult) -> Option<Self> {
                    match p {
                        ProbeResult::$variant(r) => Some(r),
                        _ => None,
                    }
                }
            }
        )*
    };
}

with_kinds!(define_kinds);

impl ProbeResult {
    /// The probe's name, as the verbs and the store's probe list spell it (`cyclic`, `oslat`, …).
    pub fn name(&self) -> &'static str {
        self.kind().as_str()
    }

    /// The result of kind `T`, if it is one (a kind's own verb taking its typed result back).
    pub fn downcast_ref<T: Kind>(&self) -> Option<&T> {
        T::from_ref(self)
    }

    /// The result of kind `T`, if it is one.
    pub fn downcast_mut<T: Kind>(&mut self) -> Option<&mut T> {
        T::from_mut(self)
    }

    /// The result of kind `T`, if it is one.
    pub fn downcast<T: Kind>(self) -> Option<T> {
        T::from_owned(self)
    }
}

impl ProbeKind {
    /// The kind named `name` ([`ProbeKind::as_str`]), if there is one.
    pub fn named(name: &str) -> Option<ProbeKind> {
        ProbeKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// What a document knows about its results that no result holds (where it came from).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunFacts {
    /// Whether missed deadlines were counted (not for an imported cyclictest result).
    pub missed_deadlines_known: bool,
}

/// Why the probe ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The requested duration (`-D`) elapsed.
    Duration,
    /// Every thread completed its cycles (`-l`).
    Loops,
    /// SIGINT or SIGTERM ended it.
    Signal,
    /// A sample crossed the break threshold (`-b`).
    Break,
}
