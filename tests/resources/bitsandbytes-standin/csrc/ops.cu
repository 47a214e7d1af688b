// One kernel, so that nvcc really compiles device code for the requested capability.
__global__ void kDequantize(float *out, const unsigned char *codes, float absmax, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (codes[i] / 127.5f - 1.0f) * absmax;
}

extern "C" void cdequantize(float *out, const unsigned char *codes, float absmax, int n) {
    kDequantize<<<(n + 255) / 256, 256>>>(out, codes, absmax, n);
}
