/* PETSc's iteration counts on a Matrix Market matrix, for the dist layer's tests: every rank
 * reads the (symmetric, coordinate) file and keeps the rows PETSc gives it (MATAIJ, PETSC_DECIDE),
 * b = A 1, x = 0, KSPSolve with the given method, preconditioner and norm type, rtol 1e-8 and an
 * iteration cap. Prints one JSON object per solve on rank 0.
 *
 *   mpicc petsc_mtx.c $(pkg-config --cflags --libs PETSc) -o petsc_mtx
 *   mpirun -np 2 ./petsc_mtx CAP FILE.mtx...      (tests/dist/petsc_counts.json: scripts/petsc-counts)
 */
#include <petscksp.h>
#include <stdio.h>
#include <string.h>

static PetscErrorCode load(const char *path, Mat *A) {
  FILE *f = fopen(path, "r");
  char line[1024];
  PetscInt rows = 0, cols = 0, entries = 0, lo, hi;
  PetscBool symmetric = PETSC_FALSE, header = PETSC_TRUE;
  PetscFunctionBeginUser;
  PetscCheck(f, PETSC_COMM_WORLD, PETSC_ERR_FILE_OPEN, "cannot open %s", path);
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '%') {
      if (header && strstr(line, "symmetric")) symmetric = PETSC_TRUE;
      continue;
    }
    header = PETSC_FALSE;
    if (sscanf(line, "%" PetscInt_FMT " %" PetscInt_FMT " %" PetscInt_FMT, &rows, &cols, &entries) == 3) break;
  }
  PetscCall(MatCreate(PETSC_COMM_WORLD, A));
  PetscCall(MatSetSizes(*A, PETSC_DECIDE, PETSC_DECIDE, rows, cols));
  PetscCall(MatSetType(*A, MATAIJ));
  PetscCall(MatSetUp(*A));
  PetscCall(MatSetOption(*A, MAT_NEW_NONZERO_ALLOCATION_ERR, PETSC_FALSE));
  PetscCall(MatGetOwnershipRange(*A, &lo, &hi));
  for (PetscInt k = 0; k < entries && fgets(line, sizeof line, f); ++k) {
    PetscInt i, j;
    double v = 1;
    if (sscanf(line, "%" PetscInt_FMT " %" PetscInt_FMT " %lf", &i, &j, &v) < 2) continue;
    --i;
    --j;
    if (i >= lo && i < hi) PetscCall(MatSetValue(*A, i, j, v, ADD_VALUES));
    if (symmetric && i != j && j >= lo && j < hi) PetscCall(MatSetValue(*A, j, i, v, ADD_VALUES));
  }
  fclose(f);
  PetscCall(MatAssemblyBegin(*A, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(*A, MAT_FINAL_ASSEMBLY));
  PetscFunctionReturn(0);
}

static PetscErrorCode solve(Mat A, const char *name, KSPType type, PCType pctype, KSPNormType norm,
                            PetscInt cap, PetscMPIInt size) {
  Vec x, b, one;
  KSP ksp;
  PC pc;
  PetscInt its;
  KSPConvergedReason reason;
  PetscFunctionBeginUser;
  PetscCall(MatCreateVecs(A, &x, &b));
  PetscCall(VecDuplicate(x, &one));
  PetscCall(VecSet(one, 1.0));
  PetscCall(MatMult(A, one, b));
  PetscCall(VecSet(x, 0.0));
  PetscCall(KSPCreate(PETSC_COMM_WORLD, &ksp));
  PetscCall(KSPSetOperators(ksp, A, A));
  PetscCall(KSPSetType(ksp, type));
  PetscCall(KSPGetPC(ksp, &pc));
  PetscCall(PCSetType(pc, pctype));
  if (strcmp(type, KSPTFQMR) == 0 && norm == KSP_NORM_UNPRECONDITIONED) {
    PetscCall(KSPSetPCSide(ksp, PC_RIGHT));
  }
  PetscCall(KSPSetNormType(ksp, norm));
  PetscCall(KSPSetTolerances(ksp, 1e-8, 1e-50, 1e4, cap));
  PetscCall(KSPSolve(ksp, b, x));
  PetscCall(KSPGetIterationNumber(ksp, &its));
  PetscCall(KSPGetConvergedReason(ksp, &reason));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD,
                        "{\"matrix\": \"%s\", \"ranks\": %d, \"ksp\": \"%s\", \"pc\": \"%s\", "
                        "\"norm\": \"%s\", \"iterations\": %" PetscInt_FMT ", \"reason\": %d}\n",
                        name, (int)size, type, pctype, KSPNormTypes[norm], its, (int)reason));
  PetscCall(KSPDestroy(&ksp));
  PetscCall(VecDestroy(&x));
  PetscCall(VecDestroy(&b));
  PetscCall(VecDestroy(&one));
  PetscFunctionReturn(0);
}

int main(int argc, char **argv) {
  PetscMPIInt size;
  PetscInt cap;
  PetscCall(PetscInitialize(&argc, &argv, NULL, NULL));
  PetscCallMPI(MPI_Comm_size(PETSC_COMM_WORLD, &size));
  PetscCheck(argc >= 3, PETSC_COMM_WORLD, PETSC_ERR_ARG_WRONG, "usage: petsc_mtx CAP FILE.mtx...");
  cap = atoi(argv[1]);
  for (int a = 2; a < argc; ++a) {
    Mat A;
    const char *name = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a];
    PetscCall(load(argv[a], &A));
    PetscCall(solve(A, name, KSPCG, PCJACOBI, KSP_NORM_PRECONDITIONED, cap, size));
    PetscCall(solve(A, name, KSPCG, PCNONE, KSP_NORM_UNPRECONDITIONED, cap, size));
    PetscCall(solve(A, name, KSPTFQMR, PCJACOBI, KSP_NORM_PRECONDITIONED, cap, size));
    PetscCall(solve(A, name, KSPTFQMR, PCJACOBI, KSP_NORM_UNPRECONDITIONED, cap, size));
    PetscCall(MatDestroy(&A));
  }
  PetscCall(PetscFinalize());
  return 0;
}
