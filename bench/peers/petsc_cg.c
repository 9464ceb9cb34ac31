/* The PETSc peer of `sluice bench` on the host: the same Laplace problems (centre = number of
 * neighbours, every neighbour -1, Dirichlet boundaries, points numbered x fastest), assembled as
 * a distributed CSR matrix (MATAIJ) over the MPI ranks, b = A 1, and KSPSolve with Jacobi and a
 * fixed number of iterations (KSPConvergedSkip, preconditioned norm) from a zero guess. Built
 * and run by bench/peers/host_peers.py; prints one JSON object per problem on rank 0.
 *
 *   petsc_cg KSP ITERATIONS REPEAT STENCIL:N [STENCIL:N ...]     e.g. petsc_cg cg 20 5 2d5:256
 */
#include <petscksp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static PetscErrorCode assemble(const char *stencil, PetscInt n, Mat *A, PetscInt *rows) {
  const PetscBool three = stencil[0] == '3';
  const PetscBool box = strcmp(stencil, "2d9") == 0 || strcmp(stencil, "3d27") == 0;
  const PetscInt nz = three ? n : 1, N = n * n * nz;
  PetscInt lo, hi, neighbours = 0;
  PetscFunctionBeginUser;
  for (int dz = -1; dz <= 1; ++dz)
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) {
        const int away = abs(dx) + abs(dy) + abs(dz);
        if (away == 0 || (!three && dz != 0) || (!box && away > 1)) continue;
        ++neighbours;
      }
  PetscCall(MatCreate(PETSC_COMM_WORLD, A));
  PetscCall(MatSetSizes(*A, PETSC_DECIDE, PETSC_DECIDE, N, N));
  PetscCall(MatSetType(*A, MATAIJ));
  PetscCall(MatSeqAIJSetPreallocation(*A, neighbours + 1, NULL));
  PetscCall(MatMPIAIJSetPreallocation(*A, neighbours + 1, NULL, neighbours, NULL));
  PetscCall(MatGetOwnershipRange(*A, &lo, &hi));
  for (PetscInt i = lo; i < hi; ++i) {
    const PetscInt ix = i % n, iy = (i / n) % n, iz = i / (n * n);
    PetscInt cols[27];
    PetscScalar vals[27];
    int k = 0;
    for (int dz = -1; dz <= 1; ++dz)
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
          const int away = abs(dx) + abs(dy) + abs(dz);
          if ((!three && dz != 0) || (!box && away > 1)) continue;
          if (ix + dx < 0 || ix + dx >= n || iy + dy < 0 || iy + dy >= n || iz + dz < 0 ||
              iz + dz >= nz)
            continue;
          cols[k] = i + dx + dy * n + dz * n * n;
          vals[k] = away == 0 ? (PetscScalar)neighbours : -1.0;
          ++k;
        }
    PetscCall(MatSetValues(*A, 1, &i, k, cols, vals, INSERT_VALUES));
  }
  PetscCall(MatAssemblyBegin(*A, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(*A, MAT_FINAL_ASSEMBLY));
  *rows = N;
  PetscFunctionReturn(0);
}

static int compare(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  PetscMPIInt rank, size;
  PetscCall(PetscInitialize(&argc, &argv, NULL, NULL));
  PetscCallMPI(MPI_Comm_rank(PETSC_COMM_WORLD, &rank));
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  if (argc < 5) {
    PetscCall(PetscPrintf(PETSC_COMM_WORLD,
                          "usage: petsc_cg KSP ITERATIONS REPEAT STENCIL:N [STENCIL:N ...]\n"));
    PetscCall(PetscFinalize());
    return 2;
  }
  const char *type = argv[1];
  const int iterations = atoi(argv[2]), repeat = atoi(argv[3]);
  for (int p = 4; p < argc; ++p) {
    char stencil[8] = {0};
    long n = 0;
    if (sscanf(argv[p], "%7[^:]:%ld", stencil, &n) != 2 || n < 2) {
      PetscCall(PetscPrintf(PETSC_COMM_WORLD, "bad problem '%s' (want e.g. 2d5:256)\n", argv[p]));
      continue;
    }
    Mat A;
    Vec b, x, one;
    KSP ksp;
    PC pc;
    PetscInt rows, nnz;
    MatInfo info;
    PetscCall(assemble(stencil, (PetscInt)n, &A, &rows));
    PetscCall(MatGetInfo(A, MAT_GLOBAL_SUM, &info));
    nnz = (PetscInt)info.nz_used;
    PetscCall(MatCreateVecs(A, &x, &b));
    PetscCall(VecDuplicate(x, &one));
    PetscCall(VecSet(one, 1.0));
    PetscCall(MatMult(A, one, b));
    PetscCall(KSPCreate(PETSC_COMM_WORLD, &ksp));
    PetscCall(KSPSetOperators(ksp, A, A));
    PetscCall(KSPSetType(ksp, type));
    PetscCall(KSPGetPC(ksp, &pc));
    PetscCall(PCSetType(pc, PCJACOBI));
    PetscCall(KSPSetNormType(ksp, KSP_NORM_PRECONDITIONED));
    PetscCall(KSPSetTolerances(ksp, 0.0, 0.0, PETSC_DEFAULT, iterations));
    PetscCall(KSPSetConvergenceTest(ksp, KSPConvergedSkip, NULL, NULL));
    PetscCall(KSPSetFromOptions(ksp));
    PetscCall(KSPSetUp(ksp));
    double *times = malloc(sizeof(double) * (size_t)(repeat + 1));
    for (int r = 0; r <= repeat; ++r) {  /* r = 0: the warm-up */
      PetscCall(VecSet(x, 0.0));
      PetscCallMPI(MPI_Barrier(PETSC_COMM_WORLD));
      const double start = MPI_Wtime();
      PetscCall(KSPSolve(ksp, b, x));
      double t = MPI_Wtime() - start, slowest;
      PetscCallMPI(MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, PETSC_COMM_WORLD));
      times[r] = slowest;
    }
    PetscInt its;
    PetscCall(KSPGetIterationNumber(ksp, &its));
    if (rank == 0) {
      printf("{\"ksp\": \"%s\", \"stencil\": \"%s\", \"n\": %ld, \"rows\": %ld, \"nnz\": %ld, "
             "\"ranks\": %d, \"iterations_done\": %ld, \"times_s\": [",
             type, stencil, n, (long)rows, (long)nnz, (int)size, (long)its);
      for (int r = 1; r <= repeat; ++r) printf("%s%.9g", r > 1 ? ", " : "", times[r]);
      printf("]}\n");
      fflush(stdout);
    }
    free(times);
    PetscCall(KSPDestroy(&ksp));
    PetscCall(VecDestroy(&one));
    PetscCall(VecDestroy(&x));
    PetscCall(VecDestroy(&b));
    PetscCall(MatDestroy(&A));
  }
  PetscCall(PetscFinalize());
  return 0;
}
