/* The pod sandbox's pause process: sleeps until SIGINT/SIGTERM, reaps zombies (what
 * k8s.io/kubernetes build/pause/linux/pause.c does, minus its version flag). Built static by
 * hack/realnode/images.sh into the local image tfps.local/pause (containerd's sandbox_image). */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) { (void)sig; _exit(0); }
static void on_child(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void) {
  struct sigaction stop = {.sa_handler = on_stop}, child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGINT, &stop, NULL);
  sigaction(SIGTERM, &stop, NULL);
  sigaction(SIGCHLD, &child, NULL);
  for (;;) pause();
  return 1;
}
