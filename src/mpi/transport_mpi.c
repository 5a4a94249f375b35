/* TEMPORARY local stub, not committed */
#include "transport.h"
#include "pinpool.h"
int pp__mpi_transport_create(MPI_Comm comm, pp__transport_t **out, char *err, size_t errlen)
{ (void)comm; (void)out; (void)err; (void)errlen; return PP_ENOTSUP; }
