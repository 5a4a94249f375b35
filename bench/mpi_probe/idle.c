#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
static int mode;
static void *prog(void *a){(void)a; int x; MPI_Status st;
  if(mode==0){ MPI_Recv(&x,1,MPI_INT,MPI_ANY_SOURCE,1,MPI_COMM_WORLD,&st); }
  else { MPI_Request rq; MPI_Irecv(&x,1,MPI_INT,MPI_ANY_SOURCE,1,MPI_COMM_WORLD,&rq); int done=0; unsigned us=1;
    while(!done){ MPI_Test(&rq,&done,&st); if(!done){ struct timespec ts={0,(long)us*1000}; nanosleep(&ts,0); if(us<1000) us*=2; } } }
  return 0;}
int main(int argc,char**argv){int prov; MPI_Init_thread(&argc,&argv,MPI_THREAD_MULTIPLE,&prov); int r; MPI_Comm_rank(MPI_COMM_WORLD,&r);
 mode = argc>1; if(r==0) printf("provided %d (MULTIPLE=%d)\n",prov,MPI_THREAD_MULTIPLE);
 pthread_t t; struct rusage u0,u1; getrusage(RUSAGE_SELF,&u0);
 if(r==1) pthread_create(&t,0,prog,0);
 sleep(3); if(r==0){int x=1; MPI_Send(&x,1,MPI_INT,1,1,MPI_COMM_WORLD);} else pthread_join(t,0);
 getrusage(RUSAGE_SELF,&u1);
 if(r==1) printf("mode %s: cpu %.2f s over 3 s idle\n", mode?"test+sleep":"blocking recv", (u1.ru_utime.tv_sec-u0.ru_utime.tv_sec)+(u1.ru_stime.tv_sec-u0.ru_stime.tv_sec)+((u1.ru_utime.tv_usec-u0.ru_utime.tv_usec)+(u1.ru_stime.tv_usec-u0.ru_stime.tv_usec))/1e6);
 MPI_Finalize(); return 0;}
