/* src/symbolize.c - names for the frames of a worker's crash report that
 * backtrace_symbols_fd cannot name.
 *
 * backtrace_symbols_fd names a frame from the dynamic symbol table
 * (dladdr), which holds only exported functions: a program linked without
 * -rdynamic shows as `prog(+0x12bf)`, and so do the static functions of any
 * object.  The full symbol table (.symtab, there unless the file was
 * stripped) names them.  rd__sym_prepare, called when the crash handler
 * is installed, notes where the program and the shared objects loaded
 * then (libraydist, a user's own libraries) are; the first frame in one
 * maps its file read-only and finds its .symtab, and each frame is looked
 * up there (a linear scan of the function symbols).  Only open, fstat,
 * mmap, close and plain memory reads once prepared, so the fatal-signal
 * handler may call it.  Frames of stripped files (Debian's libc), and of
 * objects loaded later (dlopen) or past the first RD_SYM_OBJS, are left
 * to backtrace_symbols_fd.  (A
 * `raydist stack` dump is named with file and line by its node, with
 * addr2line: runtime/stack_dump.c.) */

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

typedef struct sym_obj {
  char path[512];           /* as frames name it (the program's: /proc/self/exe's target) */
  int is_prog;              /* the program itself: opened as /proc/self/exe */
  uintptr_t bias, lo, hi;   /* load bias; the loaded segments' range */
  int state;                /* 0 not looked at, 1 symbols found, -1 none (stripped, unreadable) */
  const Elf64_Sym *syms;
  size_t nsyms;
  const char *strs;
  size_t strs_len;
} sym_obj;

#define RD_SYM_OBJS 32
static sym_obj objs[RD_SYM_OBJS];   /* the program first, then shared objects */
static int nobjs, walked;

/* dl_iterate_phdr's: the first object is the program; the others are
 * noted by the path they were loaded from (none: the vdso, named without one). */
static int note_obj(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  (void)arg;
  int prog = walked++ == 0;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t a = info->dlpi_addr + ph->p_vaddr;
    if (a < lo) lo = a;
    if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
  }
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  if ((prog || strchr(name, '/')) && lo < hi && nobjs < RD_SYM_OBJS) {
    sym_obj *o = &objs[nobjs];
    memset(o, 0, sizeof(*o));
    ssize_t n = prog ? readlink("/proc/self/exe", o->path, sizeof(o->path) - 1) : (ssize_t)strlen(name);
    if (n > 0 && (size_t)n < sizeof(o->path)) {
      if (!prog) memcpy(o->path, name, (size_t)n);
      o->path[n] = 0;
      o->is_prog = prog;
      o->bias = info->dlpi_addr;
      o->lo = lo;
      o->hi = hi;
      nobjs++;
    }
  }
  return 0;
}

void rd__sym_prepare(void) {
  if (walked) return;
  (void)dl_iterate_phdr(note_obj, NULL);
}

/* Maps o's file and finds its .symtab (async-signal-safe syscalls only). */
static void sym_load(sym_obj *o) {
  o->state = -1;
  int fd = open(o->is_prog ? "/proc/self/exe" : o->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  void *map = MAP_FAILED;
  if (fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(Elf64_Ehdr))
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return;
  const unsigned char *base = map;
  size_t size = (size_t)st.st_size;
  const Elf64_Ehdr *eh = map;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > size || eh->e_shoff % _Alignof(Elf64_Shdr) ||
      (size - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum) {
    munmap(map, size);
    return;
  }
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(base + eh->e_shoff);
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr *ss = &sh[i], *sn = &sh[ss->sh_link];
    if (ss->sh_offset > size || ss->sh_size > size - ss->sh_offset || sn->sh_offset > size ||
        sn->sh_size > size - sn->sh_offset || ss->sh_entsize != sizeof(Elf64_Sym) ||
        ss->sh_offset % _Alignof(Elf64_Sym))
      break;
    o->syms = (const Elf64_Sym *)(base + ss->sh_offset);
    o->nsyms = ss->sh_size / sizeof(Elf64_Sym);
    o->strs = (const char *)(base + sn->sh_offset);
    o->strs_len = sn->sh_size;
    o->state = 1;
    return;   /* the mapping stays: the names point into it */
  }
  munmap(map, size);
}

int rd__sym_name(const void *pc, int is_return, const char **obj, const char **name, uintptr_t *off) {
  uintptr_t a = (uintptr_t)pc;
  for (int i = 0; i < nobjs; i++) {
    sym_obj *o = &objs[i];
    if (a < o->lo || a >= o->hi) continue;
    if (o->state == 0) sym_load(o);
    if (o->state != 1) return 0;
    /* a return address may be just past its call's function: look up the call */
    uintptr_t rel = a - o->bias - (is_return ? 1 : 0);
    for (size_t k = 0; k < o->nsyms; k++) {
      const Elf64_Sym *s = &o->syms[k];
      if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_UNDEF || s->st_name >= o->strs_len) continue;
      if (rel < s->st_value || rel - s->st_value >= (s->st_size ? s->st_size : 1)) continue;
      if (!memchr(o->strs + s->st_name, 0, o->strs_len - s->st_name)) return 0;
      *obj = o->path;
      *name = o->strs + s->st_name;
      *off = a - o->bias - s->st_value;
      return 1;
    }
    return 0;
  }
  return 0;
}
