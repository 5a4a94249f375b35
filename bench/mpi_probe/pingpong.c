#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc,char**argv){int prov; MPI_Init_thread(&argc,&argv,MPI_THREAD_MULTIPLE,&prov); int r; MPI_Comm_rank(MPI_COMM_WORLD,&r);
 size_t sizes[]={4096,65536,1<<20,4<<20}; char*buf=malloc(4<<20); memset(buf,1,4<<20); int req=0;
 for(int s=0;s<4;s++){ size_t n=sizes[s]; int it= n>=(1<<20)?50:500; MPI_Barrier(MPI_COMM_WORLD); double t0=MPI_Wtime();
  for(int i=0;i<it;i++){ if(r==0){ MPI_Send(&req,1,MPI_INT,1,1,MPI_COMM_WORLD); MPI_Recv(buf,(int)n,MPI_BYTE,1,2,MPI_COMM_WORLD,MPI_STATUS_IGNORE);} else { MPI_Recv(&req,1,MPI_INT,0,1,MPI_COMM_WORLD,MPI_STATUS_IGNORE); MPI_Send(buf,(int)n,MPI_BYTE,0,2,MPI_COMM_WORLD);} }
  double t=(MPI_Wtime()-t0)/it; if(r==0) printf("request+reply %7zu B: %8.1f us (%.2f GB/s)\n", n, t*1e6, n/t/1e9); }
 MPI_Finalize(); return 0;}
