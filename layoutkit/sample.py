"""Synthetic fusion shot archive: the sample file used by the demo and the tests.

:func:`write_sample` writes an HDF5 file laid out like an export of a tokamak shot
archive (Alcator C-Mod's MDSplus trees were the model)::

    /                                   title, machine, layoutkit_sample_version, seed
    /shots/<SHOT>/                      shot, date, comment, plasma_current_MA
    /shots/<SHOT>/timebases/<CLOCK>     shared time bases: t_thomson (60 Hz), t_1khz,
                                        t_5khz, t_10khz over the whole shot (about 2 s),
                                        t_100khz and t_2mhz over short windows
    /shots/<SHOT>/timebases/<SIGNAL>_time      a signal's private copy of a shared
                                               time base (byte-identical content)
    /shots/<SHOT>/timebases/<SIGNAL>_channel   channel scale of a 2-D signal
    /shots/<SHOT>/timebases/thomson_radius     channel scale shared by two signals
    /shots/<SHOT>/signals/<SIGNAL>      units, source_path, description
                                        (+ scale_factor, offset for int16 counts)

Shot numbers follow the C-Mod convention ``1YYMMDDNNN`` (``1160930001`` is the first
shot of 30 September 2016). Signal names and their properties (dtype, clock, shape,
private time copy, channel scale) depend only on the signal's position in the
catalogue, so they are the same in every shot and in every file; the waveforms, the
per-shot durations and the few signals missing from some shots follow from the seed.

The data is built to compress like measurements: smooth programmed waveforms, sawteeth,
MHD oscillations and ELM-like bursts, plus noise of 10 to 20 quantisation steps, quantised
to digitizer counts (int16) or to a power-of-two step (floats).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from layoutkit.errors import InvalidOptionError, OutputExistsError

__all__ = ["SampleSummary", "estimate_logical_bytes", "write_sample"]

SAMPLE_VERSION = 1
MACHINE = "synthetic-tokamak"
FIRST_RUN_DAY = date(2016, 9, 30)

# Datasets larger than this are chunked and gzip-compressed; smaller ones are contiguous.
CHUNKING_THRESHOLD_BYTES = 64 * 1024
TARGET_CHUNK_BYTES = 256 * 1024
GZIP_LEVEL = 4

# The start of every full-shot time base: digitizers trigger shortly before breakdown.
PRE_TRIGGER_S = -0.05

# Independent random streams: numpy's SeedSequence pads entropy with zeros, so
# [seed, shot] and [seed, shot, 0] would collide without a distinct tag per stream.
_SCHEDULE_STREAM = 1
_SHOT_STREAM = 2
_SIGNAL_STREAM = 3
_ABSENCE_STREAM = 4


@dataclass(frozen=True)
class SampleSummary:
    """What :func:`write_sample` wrote.

    Attributes
    ----------
    path
        The file written.
    shots
        Number of shot groups.
    signals
        Signal names per shot (before the few that are missing from some shots).
    datasets
        Signal datasets actually written, over all shots.
    timebases
        Dimension-scale datasets written (shared and private time bases, channel
        scales), over all shots.
    logical_bytes
        Uncompressed bytes of all datasets.
    file_bytes
        Size of the file on disk.
    """

    path: str
    shots: int
    signals: int
    datasets: int
    timebases: int
    logical_bytes: int
    file_bytes: int


# --------------------------------------------------------------------------- catalogue


@dataclass(frozen=True)
class _Clock:
    """A digitizer clock: a sampling rate and the part of the shot it records."""

    name: str
    rate_hz: float
    window_s: tuple[float, float] | None  # None: from the pre-trigger to the shot's end


_CLOCKS = {
    clock.name: clock
    for clock in (
        _Clock("t_thomson", 60.0, None),
        _Clock("t_1khz", 1e3, None),
        _Clock("t_5khz", 5e3, None),
        _Clock("t_10khz", 10e3, None),
        _Clock("t_100khz", 100e3, (0.7, 1.0)),
        _Clock("t_2mhz", 2e6, (0.98, 1.0)),
    )
}


@dataclass(frozen=True)
class _Family:
    """A kind of signal; numbered families provide as many members as needed."""

    stem: str
    numbered: bool
    source_path: str  # formatted with n (member number)
    units: str
    description: str  # formatted with n
    dtype: str  # "f4", "f8" or "i2" (raw digitizer counts)
    clock: str
    waveform: str
    amplitude: float  # physical size of the waveform's peak
    channels: int = 0  # 0: 1-D signal; otherwise time x channels
    channel_scale: str = ""  # "index" or "radius" (own scale), else a shared scale name
    private_time: bool = False  # carries its own copy of the clock's time base
    noise: float = 0.004  # standard deviation relative to the amplitude


# The first signals of any file take one of each family, in this order, so that even a
# dozen signals hold every dtype, a 2-D signal, shared and private time bases, and a
# few signals large enough to be chunked. After that only numbered families repeat.
_FAMILIES = (
    _Family("ip", False, r"\MAGNETICS::TOP.SIGNALS:IP", "A",
            "Plasma current from the Rogowski coil", "f4", "t_10khz", "plasma_current", 1e6),
    _Family("ne_bar", False, r"\ELECTRONS::TOP.TCI.RESULTS:NL_04", "m^-3",
            "Line-averaged electron density, TCI chord 4", "f8", "t_5khz", "density", 1.5e20),
    _Family("te_ece", True, r"\ELECTRONS::TOP.ECE.GPC_RESULTS.TE:TE{n}", "keV",
            "Electron temperature, ECE radiometer channel {n}", "f4", "t_10khz",
            "temperature", 3.0),
    _Family("bp_coil", True, r"\MAGNETICS::TOP.ACTIVE_MHD.SIGNALS:BP{n:02d}_ABK", "T/s",
            "Poloidal field pickup coil {n}, raw digitizer counts", "i2", "t_100khz",
            "magnetic_pickup", 40.0),
    _Family("spectroscopy_2d", False, r"\SPECTROSCOPY::TOP.HIREX_SR.ANALYSIS:EMISS",
            "ph/s/m^3", "X-ray line emissivity from imaging crystal spectrometer", "f4",
            "t_5khz", "line_emission", 2e18, channels=32, channel_scale="radius"),
    _Family("loop_voltage", False, r"\MAGNETICS::TOP.SIGNALS:VLOOP", "V",
            "Loop voltage from the outer flux loop", "f4", "t_5khz", "loop_voltage", 2.0,
            private_time=True),
    _Family("flux_loop", True, r"\MAGNETICS::TOP.FLUX_LOOPS:FL{n:02d}", "Wb",
            "Poloidal flux, flux loop {n}", "f4", "t_5khz", "flux", 1.5,
            private_time=True),
    _Family("ts_te_profile", False, r"\ELECTRONS::TOP.YAG_NEW.RESULTS.PROFILES:TE_RZ",
            "keV", "Electron temperature profile from Thomson scattering", "f4",
            "t_thomson", "temperature_profile", 3.0, channels=16,
            channel_scale="thomson_radius", noise=0.02),
    _Family("coil_current", True, r"\ENGINEERING::TOP.POWER.PF:COIL_{n:02d}", "A",
            "Current in poloidal field coil {n}", "f4", "t_1khz", "programmed", 2e4),
    _Family("bp_fast", True, r"\MAGNETICS::TOP.ACTIVE_MHD.SIGNALS:BP_FAST{n:02d}", "T/s",
            "Fast pickup coil {n} (TAE antenna window), raw digitizer counts", "i2",
            "t_2mhz", "fast_pickup", 5.0),
    _Family("h_alpha", False, r"\SPECTROSCOPY::TOP.HA_PHOT:H_ALPHA", "W/m^2/sr",
            "D-alpha brightness, midplane view", "f4", "t_100khz", "edge_emission", 50.0),
    _Family("bolo", True, r"\SPECTROSCOPY::TOP.BOLOMETER.RESULTS.FOIL:BOLO{n:02d}", "W/m^2",
            "Foil bolometer chord {n}", "f4", "t_5khz", "radiated_power", 5e4),
    _Family("prad", False, r"\SPECTROSCOPY::TOP.BOLOMETER.RESULTS:PRAD", "W",
            "Total radiated power", "f8", "t_1khz", "radiated_power", 1e6,
            private_time=True),
    _Family("probe_isat", True, r"\EDGE::TOP.PROBES.FMP:ISAT{n:02d}", "A",
            "Ion saturation current, flush-mounted probe {n}, raw digitizer counts", "i2",
            "t_100khz", "probe_current", 0.5, noise=0.01),
    _Family("ts_ne_profile", False, r"\ELECTRONS::TOP.YAG_NEW.RESULTS.PROFILES:NE_RZ",
            "m^-3", "Electron density profile from Thomson scattering", "f4", "t_thomson",
            "density_profile", 2e20, channels=16, channel_scale="thomson_radius", noise=0.02),
    _Family("wmhd", False, r"\ANALYSIS::TOP.EFIT.RESULTS.A_EQDSK:WPLASM", "J",
            "Plasma stored energy from EFIT", "f8", "t_1khz", "stored_energy", 1e5,
            private_time=True),
    _Family("tci_chord", True, r"\ELECTRONS::TOP.TCI.RESULTS:NL_{n:02d}", "m^-2",
            "Line-integrated density, TCI chord {n}", "f8", "t_5khz", "density", 1e20),
    _Family("icrf_power", False, r"\RF::TOP.ANTENNA.RESULTS:PWR_NET", "W",
            "Net ICRF power coupled to the plasma", "f4", "t_5khz", "heating_power", 3e6),
    _Family("soft_xray", True, r"\XTOMO::TOP.SIGNALS.ARRAY_{n}:CHORDS", "W/m^2",
            "Soft X-ray diode array {n}, raw digitizer counts", "i2", "t_5khz",
            "soft_xray_profile", 2e3, channels=8, channel_scale="index"),
    _Family("bolometer_2d", False, r"\SPECTROSCOPY::TOP.BOLOMETER.RESULTS.DIODE:BRIGHT",
            "W/m^2", "AXUV diode bolometer array brightness", "f4", "t_10khz",
            "radiation_profile", 1e5, channels=24, channel_scale="index"),
    _Family("neutron_rate", False, r"\PARTICLES::TOP.NEUTRONS.GLOBAL:RESULTS", "s^-1",
            "Total D-D neutron rate", "f4", "t_5khz", "neutron_rate", 1e14,
            private_time=True),
    _Family("q95", False, r"\ANALYSIS::TOP.EFIT.RESULTS.A_EQDSK:QPSIB", "",
            "Safety factor at the 95% flux surface from EFIT", "f4", "t_1khz", "q95", 4.0),
    _Family("gas_puff", False, r"\ENGINEERING::TOP.GAS.B_SIDE:FLOW", "Torr*l/s",
            "Programmed D2 gas puff, B-side valve", "f4", "t_1khz", "programmed", 20.0,
            private_time=True),
    _Family("li", False, r"\ANALYSIS::TOP.EFIT.RESULTS.A_EQDSK:ALI", "",
            "Internal inductance from EFIT", "f4", "t_1khz", "internal_inductance", 1.2),
    _Family("divertor_tc", True, r"\EDGE::TOP.THERMOCOUPLES:TC{n:02d}", "degC",
            "Divertor tile thermocouple {n}", "f4", "t_1khz", "tile_temperature", 200.0),
)

_NUMBERED_FAMILIES = tuple(family for family in _FAMILIES if family.numbered)


@dataclass(frozen=True)
class _SignalSpec:
    """One entry of the signal catalogue: the same in every shot."""

    index: int
    name: str
    family: _Family
    member: int  # 1 for the first signal of its family, 2 for the second, ...
    source_path: str
    description: str


def _signal_catalogue(count: int) -> tuple[_SignalSpec, ...]:
    """The first ``count`` signal names with their fixed properties."""
    members = dict.fromkeys((family.stem for family in _FAMILIES), 0)
    specs = []
    for index in range(count):
        if index < len(_FAMILIES):
            family = _FAMILIES[index]
        else:
            family = _NUMBERED_FAMILIES[(index - len(_FAMILIES)) % len(_NUMBERED_FAMILIES)]
        members[family.stem] += 1
        n = members[family.stem]
        name = f"{family.stem}_{n:02d}" if family.numbered else family.stem
        specs.append(
            _SignalSpec(
                index=index,
                name=name,
                family=family,
                member=n,
                source_path=family.source_path.format(n=n),
                description=family.description.format(n=n),
            )
        )
    return tuple(specs)


# ------------------------------------------------------------------------------ shots


_SHOT_COMMENTS = (
    "Ohmic L-mode reference",
    "ICRF-heated H-mode",
    "ICRF-heated I-mode attempt",
    "Density scan, next step up",
    "Lower hybrid current drive, ICRF on top",
    "Repeat of previous shot, better gas fuelling",
    "Locked mode at the end of the flat-top",
    "Impurity injection for transport study",
    "Edge probe plunge during H-mode",
    "Disruption study: slow current quench",
)


@dataclass(frozen=True)
class _ShotConditions:
    """The machine programme of one shot: what all its signals have in common."""

    index: int
    number: int
    started_at: datetime
    comment: str
    plasma_current_ma: float
    duration_s: float  # end of the current ramp-down
    ramp_up_s: float
    ramp_down_s: float
    density_factor: float  # line density relative to the family's nominal amplitude
    heating_on_s: float
    heating_off_s: float
    heating_fraction: float  # ICRF power relative to the nominal 3 MW (0: ohmic shot)
    sawtooth_hz: float


def _shot_schedule(shots: int, seed: int) -> list[tuple[int, datetime]]:
    """C-Mod style shot numbers and start times: 18 to 35 shots per weekday."""
    rng = np.random.default_rng([seed, _SCHEDULE_STREAM])
    schedule: list[tuple[int, datetime]] = []
    day = FIRST_RUN_DAY
    while len(schedule) < shots:
        if day.weekday() < 5:
            shots_today = int(rng.integers(18, 36))
            minutes = np.cumsum(rng.integers(14, 24, size=shots_today))
            for number_today, minute in enumerate(minutes, start=1):
                shot_number = (
                    1_000_000_000 + (day.year - 2000) * 10_000_000 + day.month * 100_000
                    + day.day * 1_000 + number_today
                )
                started_at = datetime(day.year, day.month, day.day, 8, 30) + timedelta(
                    minutes=int(minute)
                )
                schedule.append((shot_number, started_at))
        day += timedelta(days=1)
    return schedule[:shots]


def _shot_conditions(shots: int, seed: int) -> list[_ShotConditions]:
    conditions = []
    for index, (number, started_at) in enumerate(_shot_schedule(shots, seed)):
        rng = np.random.default_rng([seed, _SHOT_STREAM, index])
        comment = _SHOT_COMMENTS[int(rng.integers(len(_SHOT_COMMENTS)))]
        heated = not comment.startswith("Ohmic")
        duration_s = float(rng.uniform(1.8, 2.2))
        heating_on_s = float(rng.uniform(0.55, 0.8))
        conditions.append(
            _ShotConditions(
                index=index,
                number=number,
                started_at=started_at,
                comment=comment,
                plasma_current_ma=round(float(rng.uniform(0.6, 1.3)), 3),
                duration_s=duration_s,
                ramp_up_s=float(rng.uniform(0.15, 0.3)),
                ramp_down_s=float(rng.uniform(0.25, 0.45)),
                density_factor=float(rng.uniform(0.6, 1.6)),
                heating_on_s=heating_on_s,
                heating_off_s=heating_on_s + float(rng.uniform(0.3, 0.7)),
                heating_fraction=float(rng.uniform(0.3, 1.0)) if heated else 0.0,
                sawtooth_hz=float(rng.uniform(150.0, 400.0)),
            )
        )
    return conditions


def _absent_signals(shots: int, signals: int, seed: int) -> set[tuple[int, int]]:
    """(shot index, signal index) pairs missing from the archive.

    About 3% of the signal names (never the plasma current) are each missing from
    about 15% of the shots, as when a diagnostic was off or its digitizer failed.
    """
    if shots < 2 or signals < 2:
        return set()
    rng = np.random.default_rng([seed, _ABSENCE_STREAM, shots, signals])
    flaky_count = max(1, round(0.03 * signals))
    flaky_signals = rng.choice(np.arange(1, signals), size=flaky_count, replace=False)
    missing_per_signal = max(1, round(0.15 * shots))
    absent = set()
    for signal_index in sorted(int(i) for i in flaky_signals):
        for shot_index in rng.choice(shots, size=missing_per_signal, replace=False):
            absent.add((int(shot_index), signal_index))
    return absent


# ---------------------------------------------------------------------- shot layouts


@dataclass(frozen=True)
class _TimebaseLayout:
    name: str
    clock: _Clock
    start_s: float
    samples: int

    @property
    def nbytes(self) -> int:
        return self.samples * 8


@dataclass(frozen=True)
class _ChannelScaleLayout:
    name: str
    kind: str  # "index" (int32) or "radius" (float32, metres)
    channels: int

    @property
    def nbytes(self) -> int:
        return self.channels * 4


@dataclass(frozen=True)
class _SignalLayout:
    spec: _SignalSpec
    timebase: _TimebaseLayout
    channel_scale: _ChannelScaleLayout | None
    shape: tuple[int, ...]

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.spec.family.dtype)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


@dataclass(frozen=True)
class _ShotLayout:
    conditions: _ShotConditions
    scales: tuple[_TimebaseLayout | _ChannelScaleLayout, ...]  # under timebases/
    signals: tuple[_SignalLayout, ...]

    @property
    def nbytes(self) -> int:
        return sum(scale.nbytes for scale in self.scales) + sum(
            signal.nbytes for signal in self.signals
        )


def _clock_timebase(clock: _Clock, conditions: _ShotConditions, name: str) -> _TimebaseLayout:
    start_s, stop_s = clock.window_s or (PRE_TRIGGER_S, conditions.duration_s)
    samples = int(round((stop_s - start_s) * clock.rate_hz))
    return _TimebaseLayout(name=name, clock=clock, start_s=start_s, samples=samples)


def _plan_shot(
    conditions: _ShotConditions,
    catalogue: tuple[_SignalSpec, ...],
    absent: set[tuple[int, int]],
    rate_factor: int = 1,
) -> _ShotLayout:
    """Every dataset of one shot with its shape, in writing order."""
    shared_timebases: dict[str, _TimebaseLayout] = {}
    shared_channel_scales: dict[str, _ChannelScaleLayout] = {}
    private_scales: list[_TimebaseLayout | _ChannelScaleLayout] = []
    signals = []
    for spec in catalogue:
        if (conditions.index, spec.index) in absent:
            continue
        family = spec.family
        clock = _CLOCKS[family.clock]
        if rate_factor != 1:
            clock = dataclasses.replace(clock, rate_hz=clock.rate_hz * rate_factor)
        # The shared time base is written even when only private copies use it, so
        # that every private copy has a byte-identical original in its shot.
        if clock.name not in shared_timebases:
            shared_timebases[clock.name] = _clock_timebase(clock, conditions, clock.name)
        if family.private_time:
            timebase = _clock_timebase(clock, conditions, f"{spec.name}_time")
            private_scales.append(timebase)
        else:
            timebase = shared_timebases[clock.name]
        channel_scale = None
        if family.channels:
            if family.channel_scale in ("index", "radius"):
                channel_scale = _ChannelScaleLayout(
                    f"{spec.name}_channel", family.channel_scale, family.channels
                )
                private_scales.append(channel_scale)
            else:
                if family.channel_scale not in shared_channel_scales:
                    shared_channel_scales[family.channel_scale] = _ChannelScaleLayout(
                        family.channel_scale, "radius", family.channels
                    )
                channel_scale = shared_channel_scales[family.channel_scale]
        shape = (timebase.samples, family.channels) if family.channels else (timebase.samples,)
        signals.append(_SignalLayout(spec, timebase, channel_scale, shape))
    scales = (*shared_timebases.values(), *shared_channel_scales.values(), *private_scales)
    return _ShotLayout(conditions, scales, tuple(signals))


def _plan_archive(shots: int, signals: int, seed: int, rate_factor: int = 1) -> Iterator[_ShotLayout]:
    catalogue = _signal_catalogue(signals)
    absent = _absent_signals(shots, signals, seed)
    for conditions in _shot_conditions(shots, seed):
        yield _plan_shot(conditions, catalogue, absent, rate_factor)


def _validate_counts(shots: int, signals: int, seed: int, rate_factor: int = 1) -> None:
    checks = (("shots", shots, 1), ("signals", signals, 1), ("seed", seed, 0), ("rate factor", rate_factor, 1))
    for label, value, minimum in checks:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise InvalidOptionError(
                f"Expected {label} to be an integer of at least {minimum}. Got {value!r}."
            )


def estimate_logical_bytes(shots: int, signals: int, seed: int = 0, rate_factor: int = 1) -> int:
    """Uncompressed size of the archive :func:`write_sample` would write.

    Cheap: it plans the layout (shapes and dtypes) without generating any data, and
    gives exactly the ``logical_bytes`` of the matching :func:`write_sample` call, so a
    caller can use it as the total of a progress bar.

    Parameters
    ----------
    shots
        Number of shots, at least 1.
    signals
        Signal names per shot, at least 1.
    seed
        Seed of the archive (shot durations and missing signals depend on it).
    rate_factor
        As for :func:`write_sample`.

    Returns
    -------
    int
        Bytes of all datasets (signals, time bases and channel scales), uncompressed.

    Raises
    ------
    ValueError
        If ``shots`` or ``signals`` is below 1 or ``seed`` is negative.
    """
    _validate_counts(shots, signals, seed, rate_factor)
    return sum(shot.nbytes for shot in _plan_archive(shots, signals, seed, rate_factor))


# -------------------------------------------------------------------------- waveforms


def _smoothstep(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def _current_envelope(t: np.ndarray, shot: _ShotConditions) -> np.ndarray:
    """Ramp-up, flat-top, ramp-down of the plasma current, 0 to 1."""
    ramp_up = _smoothstep(t / shot.ramp_up_s)
    ramp_down = _smoothstep((shot.duration_s - t) / shot.ramp_down_s)
    return ramp_up * ramp_down


def _heating_envelope(t: np.ndarray, shot: _ShotConditions) -> np.ndarray:
    """ICRF pulse with 5 ms edges, scaled by the shot's heating fraction."""
    on = _smoothstep((t - shot.heating_on_s) / 0.005)
    off = _smoothstep((t - shot.heating_off_s) / 0.005)
    return shot.heating_fraction * (on - off)


def _sawtooth(t: np.ndarray, frequency_hz: float, phase: float) -> np.ndarray:
    """Slow rise, fast crash; zero mean, amplitude 1."""
    return 2.0 * np.mod(t * frequency_hz + phase, 1.0) - 1.0


def _elm_bursts(t: np.ndarray, frequency_hz: float, phase: float) -> np.ndarray:
    """Periodic spikes that decay over a tenth of the period, 0 to 1."""
    return np.exp(-np.mod(t * frequency_hz + phase, 1.0) * 10.0)


def _waveform_parameters(rng: np.random.Generator) -> dict[str, float]:
    # Always the same draws in the same order, whatever the waveform uses.
    return {
        "phase": float(rng.uniform()),
        "mode_fraction": float(rng.uniform(0.08, 0.2)),  # of the Nyquist frequency
        "chirp": float(rng.uniform(-0.3, 0.3)),
        "gain": float(rng.uniform(0.7, 1.0)),
        "baseline": float(rng.uniform(-0.01, 0.01)),
        "knot_seed": int(rng.integers(2**31)),
    }


# long: one case per signal family, each a few lines of its physics; as functions they would be a dozen
# functions of the same four arguments, read one after another anyway.
def _normalised_waveform(
    layout: _SignalLayout, shot: _ShotConditions, params: dict[str, Any], t: np.ndarray
) -> np.ndarray:
    """The noiseless waveform at times ``t``, of order 1 (times channels for 2-D)."""
    family = layout.spec.family
    envelope = _current_envelope(t, shot)
    heating = _heating_envelope(t, shot)
    phase = params["phase"]
    gain = params["gain"]
    nyquist_hz = 0.5 * _CLOCKS[family.clock].rate_hz
    match family.waveform:
        case "plasma_current":
            ripple = 0.002 * np.sin(2 * np.pi * 360.0 * t + 2 * np.pi * phase)
            return shot.plasma_current_ma * envelope * (1.0 + ripple)
        case "density":
            return gain * shot.density_factor * envelope**0.8 * (
                1.0 + 0.4 * heating + 0.03 * np.sin(2 * np.pi * 3.0 * t + 2 * np.pi * phase)
            )
        case "temperature":
            core = gain * envelope * (1.0 + 0.6 * heating)
            return core * (1.0 + 0.06 * _sawtooth(t, shot.sawtooth_hz, phase))
        case "magnetic_pickup" | "fast_pickup":
            frequency_hz = params["mode_fraction"] * nyquist_hz
            window_t = t - layout.timebase.start_s
            chirped = 2 * np.pi * frequency_hz * t * (1.0 + params["chirp"] * window_t)
            mode = np.sin(chirped + 2 * np.pi * phase) * (0.3 + 0.7 * heating)
            crash = _elm_bursts(t, shot.sawtooth_hz, phase) * 0.3
            return 0.15 * envelope * (mode + crash) + params["baseline"]
        case "loop_voltage":
            breakdown = np.where(t > 0, np.exp(-np.maximum(t, 0.0) / 0.02), 0.0)
            return 3.0 * breakdown + 0.4 * envelope * (1.0 - 0.3 * heating)
        case "flux":
            return gain * (1.0 - 0.4 * np.clip(t, 0.0, None)) * _smoothstep(
                (t + 0.05) / 0.05
            ) + 0.2 * envelope
        case "programmed":
            knots = np.random.default_rng(params["knot_seed"])
            knot_t = np.linspace(PRE_TRIGGER_S, shot.duration_s, 9)
            knot_values = np.cumsum(knots.uniform(-0.3, 0.4, size=9)) * gain
            return np.interp(t, knot_t, knot_values)
        case "edge_emission":
            bursts = _elm_bursts(t, 80.0 + 200.0 * phase, phase) * heating
            return envelope * (0.3 + 0.2 * heating + 0.5 * bursts)
        case "radiated_power":
            return gain * envelope * (0.3 + 0.5 * heating)
        case "probe_current":
            blobs = np.sin(2 * np.pi * 7e3 * t + 2 * np.pi * phase) * np.sin(
                2 * np.pi * 1.1e3 * t
            )
            return 0.3 * envelope * (1.0 + 0.2 * blobs) + params["baseline"]
        case "stored_energy":
            return gain * shot.plasma_current_ma * envelope**2 * (1.0 + 1.2 * heating)
        case "heating_power":
            return heating
        case "neutron_rate":
            return envelope**2 * (0.05 + heating) ** 2
        case "tile_temperature":
            # Tiles integrate the heat flux: ohmic all shot long, more while ICRF is on.
            heating_s = shot.heating_off_s - shot.heating_on_s
            energy = 0.5 * np.clip(t, 0.0, shot.duration_s) + shot.heating_fraction * np.clip(
                t - shot.heating_on_s, 0.0, heating_s
            )
            return gain * (0.1 + 0.3 * energy)
        case "q95":
            return 0.8 / np.maximum(envelope * shot.plasma_current_ma, 0.15) + 0.3
        case "internal_inductance":
            return 1.0 - 0.2 * envelope + 0.05 * heating
        case "temperature_profile" | "density_profile" | "radiation_profile":
            x = np.linspace(0.0, 1.0, family.channels)  # normalised minor radius
            peaking = 2.0 if family.waveform == "temperature_profile" else 0.7
            profile = (1.0 - 0.95 * x**2) ** peaking
            level = envelope * (1.0 + 0.5 * heating)
            return gain * level[:, None] * profile[None, :]
        case "soft_xray_profile":
            x = np.linspace(-1.0, 1.0, family.channels)  # chord impact parameter
            profile = (1.0 - 0.9 * x**2) ** 3
            inversion = np.where(np.abs(x) < 0.35, 1.0, -0.4)  # sawtooth inversion radius
            saw = _sawtooth(t, shot.sawtooth_hz, phase)
            level = envelope * (1.0 + 0.5 * heating)
            return 0.7 * level[:, None] * profile[None, :] * (
                1.0 + 0.1 * saw[:, None] * inversion[None, :]
            )
        case "line_emission":
            x = np.linspace(-1.0, 1.0, family.channels)
            profile = np.exp(-(((x - 0.1 * (phase - 0.5)) / 0.45) ** 2))
            level = envelope * (0.2 + heating)
            return gain * level[:, None] * profile[None, :]
    raise AssertionError(f"no waveform named {family.waveform!r}")


# Quantisation. int16 signals are the counts of a 12-bit digitizer (+-2048) stored in
# 16 bits, as most archives do. float32 signals are such counts converted to physical
# units: 2**12 power-of-two steps across the amplitude. float64 signals are computed
# quantities (inversions, equilibrium fits) that keep more bits: 2**20 steps.
_INT16_COUNTS_PER_AMPLITUDE = 2000
_FLOAT_STEPS_PER_AMPLITUDE = {np.dtype("f4"): 2**12, np.dtype("f8"): 2**20}


def _quantised_samples(
    layout: _SignalLayout,
    waveform: np.ndarray,
    noise: np.ndarray,
    int16_offset_counts: int,
) -> np.ndarray:
    family = layout.spec.family
    if layout.dtype == np.int16:
        counts = np.rint((waveform + family.noise * noise) * _INT16_COUNTS_PER_AMPLITUDE)
        counts += int16_offset_counts
        return np.clip(counts, -32768, 32767).astype(np.int16)
    steps = _FLOAT_STEPS_PER_AMPLITUDE[layout.dtype]
    step = 2.0 ** math.floor(math.log2(family.amplitude / steps))
    physical = (waveform + family.noise * noise) * family.amplitude
    return (np.rint(physical / step) * step).astype(layout.dtype)


def _time_samples(timebase: _TimebaseLayout, start: int, stop: int) -> np.ndarray:
    # One formula for the shared time base, its private copies and the signals' own
    # sample times, so that copies are byte-identical.
    return timebase.start_s + np.arange(start, stop, dtype=np.float64) / timebase.clock.rate_hz


def _channel_scale_values(scale: _ChannelScaleLayout) -> np.ndarray:
    if scale.kind == "index":
        return np.arange(scale.channels, dtype=np.int32)
    # Major radius of the lines of sight, from the inner wall to the outer limiter.
    return np.linspace(0.44, 0.91, scale.channels, dtype=np.float32)


# --------------------------------------------------------------------------- writing


ProgressCallback = Callable[[int], None]


def _write_scale(
    group: h5py.Group,
    scale: _TimebaseLayout | _ChannelScaleLayout,
    progress: ProgressCallback,
) -> h5py.Dataset:
    if isinstance(scale, _TimebaseLayout):
        values = _time_samples(scale, 0, scale.samples)
        attrs = {"units": "s", "sampling_rate_hz": scale.clock.rate_hz}
    else:
        values = _channel_scale_values(scale)
        attrs = {"units": "m" if scale.kind == "radius" else ""}
    dataset = group.create_dataset(scale.name, data=values)
    dataset.attrs.update(attrs)
    dataset.make_scale(scale.name)
    progress(values.nbytes)
    return dataset


def _chunk_rows(layout: _SignalLayout) -> int:
    row_bytes = layout.nbytes // layout.shape[0]
    return max(1, min(layout.shape[0], TARGET_CHUNK_BYTES // row_bytes))


def _write_signal(
    group: h5py.Group,
    layout: _SignalLayout,
    shot: _ShotConditions,
    seed: int,
    scales: dict[str, h5py.Dataset],
    progress: ProgressCallback,
) -> None:
    spec = layout.spec
    family = spec.family
    rng = np.random.default_rng([seed, _SIGNAL_STREAM, shot.index, spec.index])
    params = _waveform_parameters(rng)
    offset_counts = int(rng.integers(-300, 300))

    if layout.nbytes > CHUNKING_THRESHOLD_BYTES:
        rows_per_write = _chunk_rows(layout)
        dataset = group.create_dataset(
            spec.name,
            shape=layout.shape,
            dtype=layout.dtype,
            chunks=(rows_per_write, *layout.shape[1:]),
            compression="gzip",
            compression_opts=GZIP_LEVEL,
            # Half of the chunked signals, alternating within each family.
            shuffle=(spec.index + spec.member) % 2 == 1,
        )
    else:
        rows_per_write = layout.shape[0]
        dataset = group.create_dataset(spec.name, shape=layout.shape, dtype=layout.dtype)

    # Written slice by slice along time, one chunk per write, so memory stays bounded.
    for start in range(0, layout.shape[0], rows_per_write):
        stop = min(start + rows_per_write, layout.shape[0])
        t = _time_samples(layout.timebase, start, stop)
        waveform = _normalised_waveform(layout, shot, params, t)
        noise = rng.standard_normal(waveform.shape)
        samples = _quantised_samples(layout, waveform, noise, offset_counts)
        dataset[start:stop] = samples
        progress(samples.nbytes)

    dataset.attrs["units"] = family.units
    dataset.attrs["source_path"] = spec.source_path
    dataset.attrs["description"] = spec.description
    if layout.dtype == np.int16:
        scale_factor = family.amplitude / _INT16_COUNTS_PER_AMPLITUDE
        dataset.attrs["scale_factor"] = np.float64(scale_factor)
        dataset.attrs["offset"] = np.float64(-offset_counts * scale_factor)

    dataset.dims[0].label = "time"
    dataset.dims[0].attach_scale(scales[layout.timebase.name])
    if layout.channel_scale is not None:
        dataset.dims[1].label = "channel"
        dataset.dims[1].attach_scale(scales[layout.channel_scale.name])


def _write_shot(
    shots_group: h5py.Group, shot: _ShotLayout, seed: int, progress: ProgressCallback
) -> None:
    conditions = shot.conditions
    group = shots_group.create_group(str(conditions.number))
    group.attrs["shot"] = np.int64(conditions.number)
    group.attrs["date"] = conditions.started_at.isoformat()
    group.attrs["comment"] = conditions.comment
    group.attrs["plasma_current_MA"] = np.float64(conditions.plasma_current_ma)

    timebase_group = group.create_group("timebases")
    scales = {scale.name: _write_scale(timebase_group, scale, progress) for scale in shot.scales}
    signal_group = group.create_group("signals")
    for signal in shot.signals:
        _write_signal(signal_group, signal, conditions, seed, scales, progress)


def _publish_without_overwriting(partial: Path, destination: Path) -> None:
    """Move the finished file into place, refusing to replace one that appeared."""
    try:
        os.link(partial, destination)  # atomic, and fails if the destination exists
    except FileExistsError:
        raise OutputExistsError(
            f"{destination} appeared while the sample was being written; it was left as is."
        ) from None
    except OSError:  # a file system without hard links
        if destination.exists():
            raise OutputExistsError(
                f"{destination} appeared while the sample was being written; it was left as is."
            ) from None
        os.replace(partial, destination)
        return
    partial.unlink()


def write_sample(  # long: one docstring for both shapes of the archive
    path: str | os.PathLike[str],
    shots: int = 25,
    signals: int = 70,
    seed: int = 0,
    progress: ProgressCallback | None = None,
    rate_factor: int = 1,
    shots_per_file: int = 0,
) -> SampleSummary:
    """Write a synthetic tokamak shot archive to a new HDF5 file, or to a new folder of
    HDF5 files.

    The layout is described in the module docstring. The defaults give about 200 MB of
    logical data; the size grows linearly with ``shots`` and roughly linearly with
    ``signals``. The file is written to a hidden sibling and renamed when complete, so
    an error or Ctrl-C never leaves a partial file at ``path``.

    Parameters
    ----------
    path
        Where to write; must not exist yet.
    shots
        Number of shots, at least 1.
    signals
        Signal names per shot, at least 1 (a few are missing from some shots).
    seed
        Seed of the waveforms, shot programmes and missing signals, at least 0. The same
        ``(shots, signals, seed)`` always gives the same data.
    progress
        Called with the number of logical bytes just written, after every write; the
        calls add up to :func:`estimate_logical_bytes`.
    rate_factor
        Every digitizer clock samples this many times faster, so every signal and time
        base is this many times longer (the chunks keep their size, about 256 KiB). The
        default gives signals of 10 kB to 1 MB; 20 gives signals of a few MB, as on
        machines with faster digitizers.
    shots_per_file
        0: one file. N: the archive as many files, as exports of one file per shot (1)
        or per run day come: ``path`` is a folder of ``shots-<FIRST SHOT>.h5`` files of N
        shots each (the last may hold fewer), each a shot archive with the root
        attributes of the one file; their shots together are the one file's, value for
        value. The folder appears whole or not at all.

    Returns
    -------
    SampleSummary
        Counts and sizes of what was written (``path`` and ``file_bytes``: the folder,
        and its files' bytes together).

    Raises
    ------
    FileExistsError
        If ``path`` already exists (an :class:`~layoutkit.errors.OutputExistsError`).
    ValueError
        If ``shots``, ``signals`` or ``rate_factor`` is below 1, ``seed`` or
        ``shots_per_file`` negative (an :class:`~layoutkit.errors.InvalidOptionError`).
    """
    _validate_counts(shots, signals, seed, rate_factor)
    if shots_per_file < 0:
        raise InvalidOptionError(f"shots_per_file must be 0 (one file) or more, not {shots_per_file}.")
    destination = Path(path)
    if destination.exists():
        raise OutputExistsError(f"{destination} already exists; choose a new path.")
    partial = destination.with_name(f".{destination.name}.{uuid.uuid4().hex[:8]}.partial")
    written = {"logical_bytes": 0, "datasets": 0, "timebases": 0}

    def count_progress(nbytes: int) -> None:
        written["logical_bytes"] += nbytes
        if progress is not None:
            progress(nbytes)

    title = (f"Synthetic tokamak shot archive (layoutkit sample): {shots} shots x {signals} signals, seed {seed}"
             + (f", clocks {rate_factor}x faster" if rate_factor != 1 else ""))
    plan = _plan_archive(shots, signals, seed, rate_factor)
    try:
        if shots_per_file:
            partial.mkdir()
            while batch := list(itertools.islice(plan, shots_per_file)):
                name = f"shots-{batch[0].conditions.number}.h5"
                _write_file(partial / name, title, seed, batch, written, count_progress)
            os.rename(partial, destination)  # the folder whole (fails if one appeared meanwhile)
        else:
            _write_file(partial, title, seed, plan, written, count_progress)
            _publish_without_overwriting(partial, destination)
    except OSError as exc:
        _remove(partial)
        if destination.exists():
            raise OutputExistsError(f"{destination} appeared while the sample was being written; it was left as is.") from None
        raise exc from None
    except BaseException:
        _remove(partial)
        raise
    files = sorted(destination.glob("*.h5")) if shots_per_file else [destination]
    return SampleSummary(
        path=str(destination),
        shots=shots,
        signals=signals,
        datasets=written["datasets"],
        timebases=written["timebases"],
        logical_bytes=written["logical_bytes"],
        file_bytes=sum(f.stat().st_size for f in files),
    )


def _write_file(path: Path, title: str, seed: int, shots: Iterable[_ShotLayout], written: dict[str, int],
                progress: ProgressCallback) -> None:
    """One HDF5 file of the archive: the root's attributes and ``shots``."""
    with h5py.File(path, "x") as archive:
        archive.attrs["title"] = title
        archive.attrs["machine"] = MACHINE
        archive.attrs["layoutkit_sample_version"] = np.int64(SAMPLE_VERSION)
        archive.attrs["seed"] = np.int64(seed)
        shots_group = archive.create_group("shots")
        for shot in shots:
            _write_shot(shots_group, shot, seed, progress)
            written["datasets"] += len(shot.signals)
            written["timebases"] += len(shot.scales)


def _remove(partial: Path) -> None:
    if partial.is_dir():
        shutil.rmtree(partial, ignore_errors=True)
    else:
        partial.unlink(missing_ok=True)
