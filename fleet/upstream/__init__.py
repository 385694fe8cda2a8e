"""Upstream truth: what real sglang and flashinfer-python releases say, read from their released files.

Holds the wheel corpus (corpus: fetched once with pip, kept unpacked), sglang's launch flags read from its
sources (flags), the value ranges it documents or enforces beyond their types (ranges), the texts a release can
print (sourcetext), the C preprocessor's `#if` for one __CUDA_ARCH__
(cppexpr), release versions and ranges as PEP 440 says (versions), and pins checked against the wheels'
Requires-Dist (pins). Pure but for the corpus's fetch.

May use: the primitives only.
"""
