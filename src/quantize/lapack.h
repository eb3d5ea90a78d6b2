// quantize/lapack: the few BLAS/LAPACK routines GPTQ uses, from the system's OpenBLAS (Debian's
// libopenblas-dev), declared with the Fortran calling convention (arguments by pointer, and the
// hidden length of each character argument at the end). Private to the quantize module.
#pragma once

#include <cstddef>

extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t uplo_len);
void dtrtri_(const char* uplo, const char* diag, const int* n, double* a, const int* lda, int* info,
             size_t uplo_len, size_t diag_len);
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
            const float* beta, float* c, const int* ldc, size_t transa_len, size_t transb_len);
void openblas_set_num_threads(int n);
int openblas_get_num_threads(void);
int openblas_get_parallel(void);  // 0 sequential, 1 pthreads, 2 OpenMP
}

extern "C" {
void ssyrk_(const char* uplo, const char* trans, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* beta, float* c, const int* ldc,
            size_t uplo_len, size_t trans_len);
}
