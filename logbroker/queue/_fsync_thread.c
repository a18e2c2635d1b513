/* A native fsync thread: fdatasync without the GIL, completion through a pipe.
 *
 * Theory of operation. A Python thread that runs an fsync takes the GIL
 * before and after the system call and runs Python code around it; the event
 * loop's thread then waits for the GIL whenever the two meet (on this
 * project's 2-core VM, about once per message at 2,000 msg/s, up to 9 ms when
 * the holder is preempted). This thread never touches the interpreter, and
 * shares no lock with the loop either (a thread preempted while holding one
 * would stall the loop the same way): `submit(fds)` fills the job's slot and
 * posts a semaphore (Linux; elsewhere writes a byte to a jobs pipe) on which
 * the thread blocks; it fdatasyncs the descriptors in order, stores the
 * outcome and signals an eventfd (elsewhere a done pipe) that the event loop
 * watches; `take()` reads it and returns the outcome. The post-then-wait and
 * write-then-read order hands the slot over, each way. One descriptor per
 * thread on Linux: a broker has a thread per queue that syncs.
 *
 * Invariants: at most one job is submitted and not taken (`busy`, the loop's
 * own: `submit` refuses a second job until `take` returned the first's), so
 * the thread and the loop never use the slot at the same time; one signal per
 * finished job, so a `take` that read it returns that job's outcome;
 * the descriptors stay open until the job is done (the caller's contract:
 * a group committer closes its log only after its last sync); `close` joins
 * the thread, so no fdatasync runs after it returns.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/types.h>
#if defined(__linux__)
#include <semaphore.h>
#include <sys/eventfd.h>
#define USE_EVENTFD 1  /* one descriptor per thread (a pipe pair elsewhere: four) */
#endif
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_FDS 64
#define JOB 'j'
#define QUIT 'q'

typedef struct {
    PyObject_HEAD
    pthread_t thread;
    int running;       /* the thread was started and not yet joined */
#ifdef USE_EVENTFD
    sem_t job_posted;  /* posted per job (or to quit); the thread waits on it */
    int quit;
#endif
    int jobs[2];       /* elsewhere: the loop writes a byte per job (or QUIT) */
    int done[2];       /* the thread signals each finished job; the loop reads */
    int busy;          /* the loop's own: a job was submitted, its outcome not taken */
    /* Handed over through the pipes, whose write/read order the accesses. */
    int fds[MAX_FDS];
    int nfds;
    int error;         /* errno of the first failed fdatasync, 0 if none */
    long long took_ns;
} FsyncThread;

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int sync_fd(int fd) {
#if defined(__APPLE__)
    return fsync(fd);
#else
    return fdatasync(fd);
#endif
}

static void *run(void *arg) {
    FsyncThread *self = (FsyncThread *)arg;
    for (;;) {
#ifdef USE_EVENTFD
        if (sem_wait(&self->job_posted) != 0) {
            if (errno == EINTR) {
                continue;
            }
            return NULL;
        }
        if (self->quit) {
            return NULL;
        }
#else
        char order;
        ssize_t got = read(self->jobs[0], &order, 1);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got != 1 || order == QUIT) {
            return NULL;
        }
#endif
        long long started = now_ns();
        int error = 0;
        for (int i = 0; i < self->nfds && !error; i++) {
            while (sync_fd(self->fds[i]) != 0) {
                if (errno != EINTR) {
                    error = errno;
                    break;
                }
            }
        }
        self->took_ns = now_ns() - started;
        self->error = error;
#ifdef USE_EVENTFD
        uint64_t one = 1;
        while (write(self->done[0], &one, sizeof one) < 0 && errno == EINTR) {
        }
#else
        char byte = 1;
        while (write(self->done[1], &byte, 1) < 0 && errno == EINTR) {
        }
#endif
    }
}

#ifndef USE_EVENTFD
static int set_flags(int fd, int nonblocking) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || (nonblocking && fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)) {
        return -1;
    }
    return fcntl(fd, F_SETFD, FD_CLOEXEC);
}
#endif

static void close_pipes(FsyncThread *self) {
    for (int i = 0; i < 2; i++) {
        if (self->jobs[i] >= 0) {
            close(self->jobs[i]);
        }
        if (self->done[i] >= 0) {
            close(self->done[i]);
        }
        self->jobs[i] = self->done[i] = -1;
    }
}

static int FsyncThread_init(FsyncThread *self, PyObject *args, PyObject *kwds) {
    static char *keywords[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "", keywords)) {
        return -1;
    }
    if (self->running) {
        PyErr_SetString(PyExc_RuntimeError, "the fsync thread is already started");
        return -1;
    }
#ifdef USE_EVENTFD
    self->done[0] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (self->done[0] < 0 || sem_init(&self->job_posted, 0, 0) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        close_pipes(self);
        return -1;
    }
#else
    /* The thread blocks reading jobs; the loop never blocks on either pipe. */
    if (pipe(self->jobs) != 0 || pipe(self->done) != 0
        || set_flags(self->jobs[0], 0) != 0 || set_flags(self->jobs[1], 1) != 0
        || set_flags(self->done[0], 1) != 0 || set_flags(self->done[1], 0) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        close_pipes(self);
        return -1;
    }
#endif
    int failed = pthread_create(&self->thread, NULL, run, self);
    if (failed) {
#ifdef USE_EVENTFD
        sem_destroy(&self->job_posted);
#endif
        close_pipes(self);
        errno = failed;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    self->running = 1;
    return 0;
}

static PyObject *FsyncThread_submit(FsyncThread *self, PyObject *fds) {
    if (!self->running) {
        PyErr_SetString(PyExc_ValueError, "the fsync thread is closed");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "an fsync is still running or its outcome was not taken");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(fds, "fds must be a sequence of file descriptors");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    if (count < 1 || count > MAX_FDS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "fds: between 1 and %d descriptors, got %zd",
                     MAX_FDS, count);
        return NULL;
    }
    int copy[MAX_FDS];
    for (Py_ssize_t i = 0; i < count; i++) {
        long fd = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (fd == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        if (fd < 0 || fd > 0x7fffffff) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "fds: %ld is not a file descriptor", fd);
            return NULL;
        }
        copy[i] = (int)fd;
    }
    Py_DECREF(seq);
    /* The thread is idle (no job is busy): the slot is the loop's to fill. */
    memcpy(self->fds, copy, sizeof(int) * (size_t)count);
    self->nfds = (int)count;
#ifdef USE_EVENTFD
    if (sem_post(&self->job_posted) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
#else
    char order = JOB;
    ssize_t wrote;
    do {
        wrote = write(self->jobs[1], &order, 1);
    } while (wrote < 0 && errno == EINTR);
    if (wrote != 1) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
#endif
    self->busy = 1;
    Py_RETURN_NONE;
}

static PyObject *FsyncThread_take(FsyncThread *self, PyObject *Py_UNUSED(ignored)) {
    uint64_t drain[1];  /* an eventfd's counter, or up to 8 bytes of a pipe */
    ssize_t got = self->done[0] >= 0 ? read(self->done[0], drain, sizeof drain) : -1;
    if (got <= 0 || !self->busy) {
        Py_RETURN_NONE;  /* not done yet (one byte per job: a read that got it, takes it) */
    }
    self->busy = 0;
    return Py_BuildValue("(iL)", self->error, self->took_ns);
}

static PyObject *FsyncThread_fileno(FsyncThread *self, PyObject *Py_UNUSED(ignored)) {
    if (self->done[0] < 0) {
        PyErr_SetString(PyExc_ValueError, "the fsync thread is closed");
        return NULL;
    }
    return PyLong_FromLong(self->done[0]);
}

static void stop(FsyncThread *self) {
    if (!self->running) {
        return;
    }
#ifdef USE_EVENTFD
    self->quit = 1;  /* seen after the job it runs, if any */
    sem_post(&self->job_posted);
#else
    char order = QUIT;  /* read after the job it runs, if any */
    while (write(self->jobs[1], &order, 1) < 0 && errno == EINTR) {
    }
#endif
    Py_BEGIN_ALLOW_THREADS
    pthread_join(self->thread, NULL);
    Py_END_ALLOW_THREADS
    self->running = 0;
#ifdef USE_EVENTFD
    sem_destroy(&self->job_posted);
#endif
    close_pipes(self);
}

static PyObject *FsyncThread_close(FsyncThread *self, PyObject *Py_UNUSED(ignored)) {
    stop(self);
    Py_RETURN_NONE;
}

static PyObject *FsyncThread_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    FsyncThread *self = (FsyncThread *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->jobs[0] = self->jobs[1] = self->done[0] = self->done[1] = -1;
    }
    return (PyObject *)self;
}

static void FsyncThread_dealloc(FsyncThread *self) {
    stop(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef FsyncThread_methods[] = {
    {"submit", (PyCFunction)FsyncThread_submit, METH_O,
     "submit(fds): fdatasync these descriptors in order on the thread."},
    {"take", (PyCFunction)FsyncThread_take, METH_NOARGS,
     "take() -> (errno, took_ns) of the finished job, or None if it is not done."},
    {"fileno", (PyCFunction)FsyncThread_fileno, METH_NOARGS,
     "fileno() -> the pipe that becomes readable when a job is done."},
    {"close", (PyCFunction)FsyncThread_close, METH_NOARGS,
     "close(): stop and join the thread (after its running job)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FsyncThreadType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "logbroker.queue._fsync_thread.FsyncThread",
    .tp_basicsize = sizeof(FsyncThread),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One native thread that fdatasyncs descriptors without the GIL.",
    .tp_new = FsyncThread_new,
    .tp_init = (initproc)FsyncThread_init,
    .tp_dealloc = (destructor)FsyncThread_dealloc,
    .tp_methods = FsyncThread_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fsync_thread",
    "A native fsync thread (see the comment at the top of _fsync_thread.c).", -1, NULL,
};

PyMODINIT_FUNC PyInit__fsync_thread(void) {
    if (PyType_Ready(&FsyncThreadType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&FsyncThreadType);
    if (PyModule_AddObject(m, "FsyncThread", (PyObject *)&FsyncThreadType) < 0) {
        Py_DECREF(&FsyncThreadType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
