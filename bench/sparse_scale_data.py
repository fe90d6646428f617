#!/usr/bin/python3
"""Writes issue 28's large synthetic series: DIR/sparse_n{N}.csv ("x,y", x in years over
[0, 50), evenly spaced), a draw from the known kernel

    C1·SE(ℓ1) + C2·PER(p, ℓp)·SE(ℓ2) + σ²·δ     (core/kernel_expr.h's SE, PER)

with C1 = 4, ℓ1 = 5, C2 = 1, p = 1 year, ℓp = 1, ℓ2 = 20, σ = 0.1, by random Fourier features
(Bochner's theorem: a stationary kernel is the Fourier transform of its spectral measure, and
with F features ω ~ that measure, f(x) = √(2C/F) Σ a_j cos(ω_j x + b_j) has covariance → k as F
grows). SE(ℓ)'s measure is N(0, 1/ℓ²); PER(p, ℓp) = exp(-2 sin²(πr/p)/ℓp²) is the cosine series
Σ_k q_k cos(2πkr/p) with q_0 = I_0(ℓp⁻²)e^(-ℓp⁻²), q_k = 2 I_k(ℓp⁻²)e^(-ℓp⁻²) (k ≥ 1, scipy's
`ive`), a measure on the harmonics 2πk/p; a product's measure is the convolution of its factors',
so PER·SE's frequencies are 2πk/p (k ~ q) plus an SE(ℓ2) frequency. The known hyperparameters
let a fit's answer be checked (the period must come out as 1 year). numpy default_rng(28 + N).
With --se-only the draw is of C1·SE(ℓ1) + σ²·δ alone (DIR/sparse_se_n{N}.csv): the kernel the
issue's 10⁶-point C*SE run fits.
  /usr/bin/python3 bench/sparse_scale_data.py DIR 100000 1000000
  /usr/bin/python3 bench/sparse_scale_data.py --se-only DIR 1000000
"""
import os
import sys

import numpy as np
from scipy.special import ive

C_SMOOTH, L_SMOOTH = 4.0, 5.0
C_SEASON, PERIOD, L_PERIODIC, L_ENVELOPE = 1.0, 1.0, 1.0, 20.0
NOISE = 0.1
FEATURES = 2000
SPAN_YEARS = 50.0


def periodic_harmonic_weights(lengthscale, harmonics=40):
    q = ive(np.arange(harmonics), lengthscale**-2)
    q[1:] *= 2.0
    return q / q.sum()  # the q_k sum to 1 (PER(0) = 1); the tail beyond 40 is below 1e-30


def features(rng, frequencies, scale):
    phases = rng.uniform(0.0, 2.0 * np.pi, frequencies.size)
    amplitudes = rng.normal(size=frequencies.size) * np.sqrt(2.0 * scale / frequencies.size)
    return frequencies, phases, amplitudes


def draw(n, rng, se_only=False):
    x = SPAN_YEARS * np.arange(n) / n
    parts = [features(rng, rng.normal(size=FEATURES) / L_SMOOTH, C_SMOOTH)]
    if not se_only:
        q = periodic_harmonic_weights(L_PERIODIC)
        harmonic = rng.choice(q.size, size=FEATURES, p=q)
        parts.append(features(
            rng, 2.0 * np.pi * harmonic / PERIOD + rng.normal(size=FEATURES) / L_ENVELOPE, C_SEASON))
    y = np.empty(n)
    for start in range(0, n, 20000):  # 20,000 × 2,000 cosines at a time: 320 MB, not 16 GB
        chunk = x[start:start + 20000, None]
        y[start:start + 20000] = sum((a * np.cos(w * chunk + b)).sum(axis=1) for w, b, a in parts)
    return x, y + rng.normal(0.0, NOISE, n)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    args = sys.argv[1:]
    se_only = args[0] == "--se-only"
    if se_only:
        args = args[1:]
    directory = args[0]
    os.makedirs(directory, exist_ok=True)
    for n in map(int, args[1:]):
        x, y = draw(n, np.random.default_rng(28 + n), se_only)
        path = os.path.join(directory, f"sparse_{'se_' if se_only else ''}n{n}.csv")
        np.savetxt(path, np.column_stack([x, y]), delimiter=",", header="x,y", comments="",
                   fmt="%.10g")
        print(f"{path}: {n} rows")


if __name__ == "__main__":
    main()
