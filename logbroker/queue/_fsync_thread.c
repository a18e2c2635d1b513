/* A native fsync thread: fdatasync without the GIL, completion through a pipe.
 *
 * Theory of operation. A Python thread that runs an fsync takes the GIL
 * before and after the system call and runs Python code around it; the event
 * loop's thread then waits for the GIL whenever the two meet (on this
 * project's 2-core VM, about once per message at 2,000 msg/s, up to 9 ms when
 * the holder is preempted). This thread never touches the interpreter:
 * `submit(fds)` hands it a job (under a mutex, without blocking on the
 * thread), it fdatasyncs the descriptors in order, stores the outcome and
 * writes one byte to a pipe whose read end the event loop watches; `take()`
 * drains the pipe and returns the outcome.
 *
 * Invariants: at most one job is pending or running, and its outcome is taken
 * once (`submit` refuses a second job until `take` returned the first's);
 * the descriptors stay open until the job is done (the caller's contract:
 * a group committer closes its log only after its last sync); `close` joins
 * the thread, so no fdatasync runs after it returns.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_FDS 64

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    pthread_t thread;
    int running;       /* the thread was started and not yet joined */
    int pipe_read, pipe_write;
    int fds[MAX_FDS];
    int nfds;
    int pending;       /* a job is submitted and not yet done */
    int done;          /* a job is done and its outcome not yet taken */
    int stopping;
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
    int fds[MAX_FDS];
    for (;;) {
        pthread_mutex_lock(&self->mutex);
        while (!self->pending && !self->stopping) {
            pthread_cond_wait(&self->wake, &self->mutex);
        }
        if (self->stopping) {
            pthread_mutex_unlock(&self->mutex);
            return NULL;
        }
        int nfds = self->nfds;
        memcpy(fds, self->fds, sizeof(int) * (size_t)nfds);
        pthread_mutex_unlock(&self->mutex);

        long long started = now_ns();
        int error = 0;
        for (int i = 0; i < nfds && !error; i++) {
            while (sync_fd(fds[i]) != 0) {
                if (errno != EINTR) {
                    error = errno;
                    break;
                }
            }
        }
        long long took = now_ns() - started;

        pthread_mutex_lock(&self->mutex);
        self->error = error;
        self->took_ns = took;
        self->pending = 0;
        self->done = 1;
        pthread_mutex_unlock(&self->mutex);
        char byte = 1;
        while (write(self->pipe_write, &byte, 1) < 0 && errno == EINTR) {
        }
    }
}

static int set_flags(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        return -1;
    }
    return fcntl(fd, F_SETFD, FD_CLOEXEC);
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
    int ends[2];
    if (pipe(ends) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    if (set_flags(ends[0]) != 0 || set_flags(ends[1]) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        close(ends[0]);
        close(ends[1]);
        return -1;
    }
    self->pipe_read = ends[0];
    self->pipe_write = ends[1];
    pthread_mutex_init(&self->mutex, NULL);
    pthread_cond_init(&self->wake, NULL);
    int failed = pthread_create(&self->thread, NULL, run, self);
    if (failed) {
        close(ends[0]);
        close(ends[1]);
        self->pipe_read = self->pipe_write = -1;
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
    pthread_mutex_lock(&self->mutex);
    if (self->pending || self->done) {
        pthread_mutex_unlock(&self->mutex);
        PyErr_SetString(PyExc_RuntimeError,
                        "an fsync is still running or its outcome was not taken");
        return NULL;
    }
    memcpy(self->fds, copy, sizeof(int) * (size_t)count);
    self->nfds = (int)count;
    self->pending = 1;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->mutex);
    Py_RETURN_NONE;
}

static PyObject *FsyncThread_take(FsyncThread *self, PyObject *Py_UNUSED(ignored)) {
    char drain[64];
    if (self->pipe_read >= 0) {
        while (read(self->pipe_read, drain, sizeof drain) > 0) {
        }
    }
    pthread_mutex_lock(&self->mutex);
    if (!self->done) {
        pthread_mutex_unlock(&self->mutex);
        Py_RETURN_NONE;
    }
    int error = self->error;
    long long took = self->took_ns;
    self->done = 0;
    pthread_mutex_unlock(&self->mutex);
    return Py_BuildValue("(iL)", error, took);
}

static PyObject *FsyncThread_fileno(FsyncThread *self, PyObject *Py_UNUSED(ignored)) {
    if (self->pipe_read < 0) {
        PyErr_SetString(PyExc_ValueError, "the fsync thread is closed");
        return NULL;
    }
    return PyLong_FromLong(self->pipe_read);
}

static void stop(FsyncThread *self) {
    if (!self->running) {
        return;
    }
    pthread_mutex_lock(&self->mutex);
    self->stopping = 1;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->mutex);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(self->thread, NULL);
    Py_END_ALLOW_THREADS
    self->running = 0;
    close(self->pipe_read);
    close(self->pipe_write);
    self->pipe_read = self->pipe_write = -1;
    pthread_cond_destroy(&self->wake);
    pthread_mutex_destroy(&self->mutex);
}

static PyObject *FsyncThread_close(FsyncThread *self, PyObject *Py_UNUSED(ignored)) {
    stop(self);
    Py_RETURN_NONE;
}

static PyObject *FsyncThread_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    FsyncThread *self = (FsyncThread *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->pipe_read = self->pipe_write = -1;
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
