// SIMULATED flashinfer 0.6.3: stands in for the batch prefill / decode attention sources
// (csrc/batch_prefill.cu, csrc/batch_decode.cu); the simulated build preprocesses it per target arch.
